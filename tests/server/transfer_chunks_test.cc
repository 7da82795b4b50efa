// WriteBuffer's chunks read from gRPC's bytes in place, and ReadBuffer's
// chunks made from a slice: the bytes are kad.proto's messages, whatever
// their encoding, and bytes that are not one are refused by name.
#include "server/transfer_chunks.h"

#include <google/protobuf/unknown_field_set.h>
#include <grpc/slice.h>
#include <grpcpp/support/proto_buffer_reader.h>

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kad/v1/kad.pb.h"

namespace kad::server {
namespace {

using ::testing::HasSubstr;

// `bytes` as a ByteBuffer of slices of at most `slice` bytes each, as gRPC
// hands over a message that arrived in several reads.
grpc::ByteBuffer sliced(const std::string& bytes, size_t slice) {
  std::vector<grpc::Slice> slices;
  for (size_t at = 0; at < bytes.size(); at += slice)
    slices.emplace_back(bytes.data() + at, std::min(slice, bytes.size() - at));
  return grpc::ByteBuffer(slices.data(), slices.size());
}

std::string data_of(const WriteChunk& chunk) {
  std::string out;
  for (const std::span<const std::byte> piece : chunk.data)
    out.append(reinterpret_cast<const char*>(piece.data()), piece.size());
  return out;
}

std::string pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + i % 23);
  return s;
}

TEST(WriteChunkReader, ReadsAChunkSplitOverManySlicesInPlace) {
  v1::WriteBufferChunk c;
  c.set_queue(3);
  c.set_buffer(1ull << 40);
  c.set_offset(77);
  c.set_size(5000);
  c.set_data(pattern(5000));
  const std::string bytes = c.SerializeAsString();
  for (const size_t slice : {size_t{1}, size_t{7}, size_t{4096}, bytes.size()}) {
    grpc::ByteBuffer message = sliced(bytes, slice);
    WriteChunkReader reader;
    absl::StatusOr<WriteChunk> chunk = reader.parse(message);
    ASSERT_TRUE(chunk.ok()) << chunk.status();
    EXPECT_EQ(chunk->queue, 3u);
    EXPECT_EQ(chunk->buffer, 1ull << 40);
    EXPECT_EQ(chunk->offset, 77u);
    EXPECT_EQ(chunk->size, 5000u);
    EXPECT_EQ(chunk->data_size, 5000u);
    EXPECT_EQ(data_of(*chunk), c.data()) << "slices of " << slice;
    // In place: no piece longer than a slice (gRPC merges slices of a few
    // bytes as it adds them, into one of up to GRPC_SLICE_INLINED_SIZE).
    for (const auto& piece : chunk->data)
      EXPECT_LE(piece.size(), std::max<size_t>(slice, GRPC_SLICE_INLINED_SIZE));
    if (slice == 4096) {
      EXPECT_EQ(chunk->data.size(), 2u) << "5000 bytes over slices of 4096";
    }
  }
}

TEST(WriteChunkReader, TakesFieldsInAnyOrderSkipsUnknownOnesAndTakesTheLastData) {
  // The size after the data (field order, as protobuf writes it), then an
  // unknown field, a known number of another wire type, and a second data
  // field, which protobuf's parser would take.
  v1::WriteBufferChunk c;
  c.set_size(4);
  c.set_data("old!");
  google::protobuf::UnknownFieldSet* unknown = c.GetReflection()->MutableUnknownFields(&c);
  unknown->AddVarint(99, 12345);
  unknown->AddLengthDelimited(1, "a queue that is no varint");
  unknown->AddLengthDelimited(4, "new");
  const std::string bytes = c.SerializeAsString();
  v1::WriteBufferChunk by_protobuf;
  ASSERT_TRUE(by_protobuf.ParseFromString(bytes));
  grpc::ByteBuffer message = sliced(bytes, 5);
  WriteChunkReader reader;
  absl::StatusOr<WriteChunk> chunk = reader.parse(message);
  ASSERT_TRUE(chunk.ok()) << chunk.status();
  EXPECT_EQ(data_of(*chunk), by_protobuf.data());
  EXPECT_EQ(data_of(*chunk), "new");
  EXPECT_EQ(chunk->size, 4u);
  EXPECT_EQ(chunk->queue, 0u);
}

TEST(WriteChunkReader, AChunkWithoutDataHasNone) {
  v1::WriteBufferChunk c;
  c.set_buffer(9);
  grpc::ByteBuffer message = sliced(c.SerializeAsString(), 3);
  WriteChunkReader reader;
  absl::StatusOr<WriteChunk> chunk = reader.parse(message);
  ASSERT_TRUE(chunk.ok()) << chunk.status();
  EXPECT_EQ(chunk->buffer, 9u);
  EXPECT_EQ(chunk->data_size, 0u);
  EXPECT_TRUE(chunk->data.empty());
}

TEST(WriteChunkReader, RefusesBytesThatAreNoChunkNamingWhatIsWrong) {
  const struct {
    std::string bytes;
    std::string says;
  } cases[] = {
      {std::string("\x22\x64", 2) + "short", "its data says 100 bytes and fewer follow"},
      {std::string("\x22\xff\xff\xff\xff\x0f", 6), "fewer follow"},
      {std::string("\x22", 1), "the data's length"},
      {std::string("\x08\xff\xff", 3), "field 1"},
      {std::string("\x00\x01", 2), "malformed"},
      {std::string("\x0f", 1), "field 1 of wire type 7"},
      {std::string("\x02\x00", 2), "a field numbered 0"},
      // 2^32 + 5: protobuf refuses it whole; cut to 32 bits it would read 5.
      {std::string("\x22\x85\x80\x80\x80\x10", 6) + "fives", "says 4294967301 bytes"},
  };
  for (const auto& c : cases) {
    grpc::ByteBuffer message = sliced(c.bytes, 1);
    WriteChunkReader reader;
    absl::StatusOr<WriteChunk> chunk = reader.parse(message);
    ASSERT_FALSE(chunk.ok()) << "bytes of size " << c.bytes.size();
    EXPECT_EQ(chunk.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(chunk.status().message(), HasSubstr("a WriteBuffer chunk that does not parse"));
    EXPECT_THAT(chunk.status().message(), HasSubstr(c.says));
  }
}

TEST(BufferChunk, IsABufferChunkOfTheSliceItWasGiven) {
  for (const size_t n : {size_t{0}, size_t{12}, size_t{1} << 20}) {
    const std::string data = pattern(n);
    grpc::ByteBuffer message = buffer_chunk(grpc::Slice(data.data(), data.size()));
    grpc::ProtoBufferReader reader(&message);
    v1::BufferChunk parsed;
    ASSERT_TRUE(parsed.ParseFromZeroCopyStream(&reader));
    EXPECT_EQ(parsed.data(), data) << n << " bytes";
  }
}

}  // namespace
}  // namespace kad::server
