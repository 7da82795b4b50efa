#include "server/transfer_chunks.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>
#include <grpc/slice.h>
#include <grpcpp/support/proto_buffer_reader.h>

#include <array>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "kad/v1/kad.pb.h"

namespace kad::server {
namespace {

using google::protobuf::internal::WireFormatLite;

absl::Status unparsable(absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrFormat("a WriteBuffer chunk that does not parse: %s", why));
}

}  // namespace

absl::StatusOr<WriteChunk> WriteChunkReader::parse(grpc::ByteBuffer& message) {
  WriteChunk chunk;
  // One pass over the fields finds where the data is; it is then taken from
  // the message's slices in place.
  int data_at = 0;
  uint64_t data_size = 0;
  {
    grpc::ProtoBufferReader reader(&message);
    if (!reader.status().ok()) return unparsable("gRPC gave no bytes");
    google::protobuf::io::CodedInputStream in(&reader);
    while (const uint32_t tag = in.ReadTag()) {
      const int field = WireFormatLite::GetTagFieldNumber(tag);
      const WireFormatLite::WireType type = WireFormatLite::GetTagWireType(tag);
      if (field == 0) return unparsable("a field numbered 0");
      uint64_t* varint = nullptr;
      switch (field) {
        case v1::WriteBufferChunk::kQueueFieldNumber:
          varint = &chunk.queue;
          break;
        case v1::WriteBufferChunk::kBufferFieldNumber:
          varint = &chunk.buffer;
          break;
        case v1::WriteBufferChunk::kOffsetFieldNumber:
          varint = &chunk.offset;
          break;
        case v1::WriteBufferChunk::kSizeFieldNumber:
          varint = &chunk.size;
          break;
        default:
          break;
      }
      if (varint != nullptr && type == WireFormatLite::WIRETYPE_VARINT) {
        if (!in.ReadVarint64(varint)) return unparsable(absl::StrFormat("field %d", field));
        continue;
      }
      if (field == v1::WriteBufferChunk::kDataFieldNumber &&
          type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
        // Read whole, as protobuf does: a length past 32 bits is refused,
        // not cut to its low bits.
        if (!in.ReadVarint64(&data_size)) return unparsable("the data's length");
        data_at = in.CurrentPosition();
        if (data_size > static_cast<uint64_t>(INT32_MAX) || !in.Skip(static_cast<int>(data_size))) {
          return unparsable(absl::StrFormat("its data says %d bytes and fewer follow", data_size));
        }
        continue;
      }
      // Unknown to this version, or of another wire type: skipped, as
      // protobuf skips them.
      if (!WireFormatLite::SkipField(&in, tag)) {
        return unparsable(absl::StrFormat("field %d of wire type %d", field, type));
      }
    }
    if (!in.ConsumedEntireMessage()) return unparsable("a field tag is malformed");
  }
  slices_.clear();
  pieces_.clear();
  if (data_size > 0) {
    if (!message.Dump(&slices_).ok()) return unparsable("gRPC gave no bytes");
    // The pieces of [data_at, data_at + data_size) in the slices, in order.
    uint64_t slice_at = 0, from = static_cast<uint64_t>(data_at), left = data_size;
    for (const grpc::Slice& slice : slices_) {
      const uint64_t slice_end = slice_at + slice.size();
      if (left > 0 && from < slice_end) {
        const uint64_t in_slice = from - slice_at;
        const uint64_t n = std::min<uint64_t>(left, slice.size() - in_slice);
        pieces_.emplace_back(reinterpret_cast<const std::byte*>(slice.begin()) + in_slice, n);
        from += n;
        left -= n;
      }
      slice_at = slice_end;
    }
    // The parse above read them: only a ByteBuffer that changed between its
    // two reads could get here.
    if (left > 0) return unparsable("its data ends early");
  }
  chunk.data = pieces_;
  chunk.data_size = data_size;
  return chunk;
}

grpc::ByteBuffer buffer_chunk(grpc::Slice data) {
  std::array<uint8_t, 16> header;
  uint8_t* end = WireFormatLite::WriteTagToArray(
      v1::BufferChunk::kDataFieldNumber, WireFormatLite::WIRETYPE_LENGTH_DELIMITED, header.data());
  end = google::protobuf::io::CodedOutputStream::WriteVarint32ToArray(
      static_cast<uint32_t>(data.size()), end);
  const grpc::Slice slices[2] = {
      grpc::Slice(header.data(), static_cast<size_t>(end - header.data())), std::move(data)};
  return grpc::ByteBuffer(slices, 2);
}

}  // namespace kad::server
