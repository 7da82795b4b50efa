// Large copies over gRPC (WriteBuffer, ReadBuffer), streamed in chunks of
// kChunk without copying the caller's memory into messages. A write's chunk
// is the few bytes of its header (the first chunk's fields, then the data
// field's tag and length) followed by a gRPC slice that lends the caller's
// bytes: gRPC sends them from where they are. A read's chunk is parsed from
// gRPC's own receive slices straight into the caller's memory. Both go
// through gRPC's generic (ByteBuffer) API, driven one operation at a time on
// a completion queue of the copy's own; the wire is the same WriteBuffer and
// ReadBuffer messages kad.proto defines.
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/proto_buffer_reader.h>

#include <array>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "client/src/connection.h"

namespace kad::client {
namespace {

using google::protobuf::internal::WireFormatLite;

// The caller's bytes, lent to gRPC as slices. gRPC may hold a slice past the
// call's end (a cancelled call's bytes still on their way to the socket), so
// the copy returns only when gRPC has given every one back: the caller may
// then free its memory.
class LentBytes {
 public:
  ~LentBytes() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(this, &LentBytes::all_back));
  }
  grpc::Slice lend(const std::byte* data, size_t size) {
    {
      absl::MutexLock lock(&mu_);
      ++out_;
    }
    return grpc::Slice(const_cast<std::byte*>(data), size, &LentBytes::given_back, this);
  }

 private:
  static void given_back(void* self) {
    auto* lent = static_cast<LentBytes*>(self);
    absl::MutexLock lock(&lent->mu_);
    --lent->out_;
  }
  bool all_back() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return out_ == 0; }
  absl::Mutex mu_;
  int out_ ABSL_GUARDED_BY(mu_) = 0;
};

// One streaming call through the generic stub, each operation waited for:
// a copy has one message in flight at a time, as gRPC allows.
class GenericCall {
 public:
  GenericCall(Connection& connection, const char* method)
      : connection_(connection),
        stub_(connection.channel),
        method_(absl::StrCat("/", v1::Kad::service_full_name(), "/", method)) {
    connection.attach(context_);
    call_ = stub_.PrepareCall(&context_, method_, &cq_);
    call_->StartCall(this);
    open_ = next();
  }
  ~GenericCall() {
    call_.reset();
    cq_.Shutdown();
    void* tag;
    bool ok;
    while (cq_.Next(&tag, &ok)) {
    }
  }
  // False once the call has failed: finish() then says why.
  bool write(const grpc::ByteBuffer& message) {
    if (!open_) return false;
    call_->Write(message, this);
    return open_ = next();
  }
  void writes_done() {
    if (!open_) return;
    call_->WritesDone(this);
    open_ = next();
  }
  // False at the end of the stream or once the call has failed.
  bool read(grpc::ByteBuffer* message) {
    call_->Read(message, this);
    return next();
  }
  absl::Status finish() {
    grpc::Status status;
    call_->Finish(&status, this);
    next();
    return connection_.status_of(status);
  }
  void cancel() { context_.TryCancel(); }

 private:
  bool next() {
    void* tag;
    bool ok = false;
    return cq_.Next(&tag, &ok) && ok;
  }
  const Connection& connection_;
  grpc::ClientContext context_;
  grpc::CompletionQueue cq_;
  grpc::GenericStub stub_;
  std::string method_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call_;
  bool open_ = false;
};

// The bytes of a WriteBufferChunk up to its data: `first`'s fields (the
// first chunk only), then the data field's tag and length.
size_t chunk_header(const v1::WriteBufferChunk* first, size_t data_size,
                    std::array<uint8_t, 64>& out) {
  google::protobuf::io::ArrayOutputStream array(out.data(), static_cast<int>(out.size()));
  google::protobuf::io::CodedOutputStream header(&array);
  if (first != nullptr) first->SerializeWithCachedSizes(&header);
  header.WriteTag(WireFormatLite::MakeTag(v1::WriteBufferChunk::kDataFieldNumber,
                                          WireFormatLite::WIRETYPE_LENGTH_DELIMITED));
  header.WriteVarint32(static_cast<uint32_t>(data_size));
  header.Trim();
  return static_cast<size_t>(header.ByteCount());
}

}  // namespace

absl::Status write_streamed(Connection& connection, uint64_t queue, const Buffer& buffer,
                            uint64_t offset, std::span<const std::byte> data) {
  LentBytes lent;  // outlives the call: waits for gRPC to give the bytes back
  GenericCall call(connection, "WriteBuffer");
  v1::WriteBufferChunk first;
  first.set_queue(queue);
  first.set_buffer(buffer.handle);
  first.set_offset(offset);
  first.set_size(data.size());  // kad checks the whole range before the first byte
  first.ByteSizeLong();         // caches the sizes SerializeWithCachedSizes uses
  std::array<uint8_t, 64> header;
  for (size_t done = 0; done < data.size();) {
    const size_t n = std::min<size_t>(kChunk, data.size() - done);
    const size_t header_size = chunk_header(done == 0 ? &first : nullptr, n, header);
    const grpc::Slice slices[2] = {grpc::Slice(header.data(), header_size),  // copied: a few bytes
                                   lent.lend(data.data() + done, n)};
    if (!call.write(grpc::ByteBuffer(slices, 2))) break;  // finish() says why
    done += n;
  }
  call.writes_done();
  grpc::ByteBuffer response;
  call.read(&response);
  return call.finish();
}

absl::Status read_streamed(Connection& connection, uint64_t queue, const Buffer& buffer,
                           uint64_t offset, std::span<std::byte> data) {
  GenericCall call(connection, "ReadBuffer");
  v1::ReadBufferRequest request;
  request.set_queue(queue);
  request.set_buffer(buffer.handle);
  request.set_offset(offset);
  request.set_size(data.size());
  grpc::ByteBuffer request_bytes;
  bool own_buffer = false;
  if (!grpc::SerializationTraits<v1::ReadBufferRequest>::Serialize(request, &request_bytes,
                                                                   &own_buffer)
           .ok()) {
    return absl::InternalError("could not serialize a ReadBufferRequest");
  }
  call.write(request_bytes);
  call.writes_done();
  size_t done = 0;
  grpc::ByteBuffer message;
  absl::Status malformed;
  while (malformed.ok() && call.read(&message)) {
    // A BufferChunk: its data field is copied from gRPC's slices into place.
    grpc::ProtoBufferReader reader(&message);
    google::protobuf::io::CodedInputStream in(&reader);
    while (const uint32_t tag = in.ReadTag()) {
      if (tag != WireFormatLite::MakeTag(v1::BufferChunk::kDataFieldNumber,
                                         WireFormatLite::WIRETYPE_LENGTH_DELIMITED)) {
        if (WireFormatLite::SkipField(&in, tag)) continue;
        malformed = absl::InternalError("kad sent a chunk that does not parse");
        break;
      }
      uint32_t size = 0;
      if (!in.ReadVarint32(&size)) {
        malformed = absl::InternalError("kad sent a chunk that does not parse");
        break;
      }
      if (size > data.size() - done) {
        malformed = absl::InternalError("kad returned more data than asked for");
        break;
      }
      if (!in.ReadRaw(data.data() + done, static_cast<int>(size))) {
        malformed = absl::InternalError("kad sent a chunk shorter than it said");
        break;
      }
      done += size;
    }
    message.Clear();
  }
  if (!malformed.ok()) {
    call.cancel();
    call.finish().ok();
    return malformed;
  }
  absl::Status s = call.finish();
  if (s.ok() && done != data.size()) {
    return absl::InternalError(absl::StrFormat("kad returned %d of %d bytes", done, data.size()));
  }
  return s;
}

}  // namespace kad::client
