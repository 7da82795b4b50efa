// WriteBuffer's and ReadBuffer's chunks as gRPC's bytes, their data never
// copied through a protobuf message (issue 13). A write chunk's data is
// found in place in gRPC's receive slices and copied from there into the
// buffer; a read chunk's data goes out in the slice the buffer was read
// into. The wire is kad.proto's WriteBufferChunk and BufferChunk, so any
// gRPC client of kad.proto speaks it.
#pragma once

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"

namespace kad::server {

// A WriteBufferChunk, its data in place.
struct WriteChunk {
  // The first chunk's fields; 0 where absent, as protobuf reads them.
  uint64_t queue = 0;
  uint64_t buffer = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  // The data field's bytes, in order: pieces of the message's slices.
  std::span<const std::span<const std::byte>> data;
  uint64_t data_size = 0;
};

// Reads the chunks of one WriteBuffer stream, reusing its memory.
class WriteChunkReader {
 public:
  // Parses `message`, a WriteBufferChunk in any valid encoding: fields in
  // any order, unknown ones skipped, the last of a repeated field taken.
  // The chunk's data points into slices this reader holds until the next
  // parse. INVALID_ARGUMENT, naming what is wrong, for bytes that do not
  // parse as one.
  absl::StatusOr<WriteChunk> parse(grpc::ByteBuffer& message);

 private:
  std::vector<grpc::Slice> slices_;
  std::vector<std::span<const std::byte>> pieces_;
};

// A BufferChunk whose data is `data`, lent as it is.
grpc::ByteBuffer buffer_chunk(grpc::Slice data);

}  // namespace kad::server
