// A queue over one gRPC Submit stream: launches, waits and small copies in
// order; answers read in order; submitted launches pipeline.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/src/connection.h"

namespace kad::client {
namespace {

class GrpcTransport final : public Queue::Transport {
 public:
  GrpcTransport(std::shared_ptr<Connection> connection, uint64_t queue)
      : connection_(std::move(connection)), queue_(queue) {
    connection_->attach(context_);
    rw_ = connection_->stub->Submit(&context_);
  }
  ~GrpcTransport() override {
    if (finished_) return;  // kad ended the stream, and said why
    while (pending_ > 0 && read_pending().ok()) {
    }
    if (finished_) return;
    rw_->WritesDone();
    rw_->Finish().ok();
  }

  bool shared_memory() const override { return false; }

  absl::StatusOr<LaunchInfo> launch(const Kernel& kernel, const Dims* ndrange,
                                    const Dims* workgroup, std::span<const Arg> args,
                                    const Dims* offsets) override {
    encode_launch(kernel, ndrange, workgroup, args, offsets);
    if (absl::Status s = roundtrip(launch_); !s.ok()) return s;
    LaunchInfo info;
    info.event = reply_.event();
    info.linear = reply_.choice().linear();
    info.index_bits = static_cast<int>(reply_.choice().index_bits());
    info.rank = static_cast<int>(reply_.choice().rank());
    for (int64_t w : reply_.workgroup())
      if (info.workgroup.rank < kMaxRank)
        info.workgroup.v[static_cast<size_t>(info.workgroup.rank++)] = w;
    return info;
  }

  absl::Status submit(const Kernel& kernel, const Dims* ndrange, const Dims* workgroup,
                      std::span<const Arg> args, const Dims* offsets) override {
    if (pending_ >= Queue::kMaxInFlight) {
      if (absl::Status s = read_pending(); !s.ok()) return s;
    }
    encode_launch(kernel, ndrange, workgroup, args, offsets);
    launch_.set_queue(queue_);
    launch_.set_tag(next_tag_++);
    if (finished_ || !rw_->Write(launch_)) return closed();
    ++pending_;
    return absl::OkStatus();
  }

  absl::Status wait(uint64_t event) override {
    wait_.mutable_wait()->set_event(event);
    return after_wait(roundtrip(wait_));
  }

  absl::Status ping() override {
    ping_.mutable_ping();
    return roundtrip(ping_);
  }

  absl::Status write(const Buffer& buffer, uint64_t offset,
                     std::span<const std::byte> data) override {
    if (data.size() > kChunk) return write_streamed(*connection_, queue_, buffer, offset, data);
    v1::CopyIn* c = copy_in_.mutable_copy_in();
    c->set_buffer(buffer.handle);
    c->set_offset(offset);
    c->set_data(reinterpret_cast<const char*>(data.data()), data.size());
    return roundtrip(copy_in_);
  }

  absl::Status read(const Buffer& buffer, uint64_t offset, std::span<std::byte> data) override {
    if (data.size() > kChunk) return read_streamed(*connection_, queue_, buffer, offset, data);
    v1::CopyOut* c = copy_out_.mutable_copy_out();
    c->set_buffer(buffer.handle);
    c->set_offset(offset);
    c->set_size(data.size());
    if (absl::Status s = roundtrip(copy_out_); !s.ok()) return s;
    if (reply_.data().size() != data.size()) {
      return absl::InternalError("kad returned a copy of the wrong size");
    }
    std::memcpy(data.data(), reply_.data().data(), data.size());
    return absl::OkStatus();
  }

 private:
  // The stream ended: its status (Finish, once per stream), kept for every
  // later call.
  absl::Status closed() {
    if (!finished_) {
      finished_ = true;
      final_ = from_grpc(rw_->Finish());
      if (final_.ok()) final_ = absl::UnavailableError("the queue's stream to kad closed");
    }
    return final_;
  }

  // Fills launch_ in place: its submessages and argument records are kept
  // from launch to launch (Clear() would free them), so a warm launch
  // allocates nothing. A submessage is dropped only when a launch leaves it
  // unset where the last one set it.
  void encode_launch(const Kernel& kernel, const Dims* ndrange, const Dims* workgroup,
                     std::span<const Arg> args, const Dims* offsets) {
    v1::Launch* l = launch_.mutable_launch();
    l->set_kernel(kernel.handle);
    if (ndrange) {
      v1::NdRange* r = l->mutable_ndrange();
      to_wire(*ndrange, r->mutable_extents());
      if (offsets) {
        to_wire(*offsets, r->mutable_offsets());
      } else {
        r->clear_offsets();
      }
    } else if (l->has_ndrange()) {
      l->clear_ndrange();
    }
    if (workgroup) {
      to_wire(*workgroup, l->mutable_workgroup()->mutable_sizes());
    } else if (l->has_workgroup()) {
      l->clear_workgroup();
    }
    l->mutable_args()->Clear();  // keeps the records for add_args() to reuse
    for (const Arg& a : args) {
      v1::KernelArg* w = l->add_args();
      w->Clear();
      switch (a.kind()) {
        case Arg::Kind::kBuffer:
          w->set_buffer(a.value());
          break;
        case Arg::Kind::kLocal:
          w->set_local_bytes(a.value());
          break;
        case Arg::Kind::kScalar:
          w->set_scalar_bits(a.value());
          w->set_scalar(to_wire(a.scalar_type()));
          break;
      }
    }
  }

  // Reads one answer to a submitted launch; keeps the first error.
  absl::Status read_pending() {
    if (finished_ || !rw_->Read(&reply_)) {
      pending_ = 0;
      return closed();
    }
    --pending_;
    if (reply_.code() != 0) defer(static_cast<absl::StatusCode>(reply_.code()), reply_.message());
    return absl::OkStatus();
  }

  // Sends `command`, reads its answer into reply_ (after the answers still
  // owed to submitted launches: they come first, in order).
  absl::Status roundtrip(v1::QueueCommand& command) {
    command.set_queue(queue_);
    command.set_tag(next_tag_++);
    if (finished_ || !rw_->Write(command)) return closed();
    while (pending_ > 0) {
      if (absl::Status s = read_pending(); !s.ok()) return s;
    }
    if (!rw_->Read(&reply_)) return closed();
    if (reply_.tag() != command.tag()) {
      return absl::InternalError(absl::StrFormat("kad answered command %d with the reply to %d",
                                                 command.tag(), reply_.tag()));
    }
    if (reply_.code() != 0) {
      return absl::Status(static_cast<absl::StatusCode>(reply_.code()), reply_.message());
    }
    return absl::OkStatus();
  }

  std::shared_ptr<Connection> connection_;
  uint64_t queue_;
  grpc::ClientContext context_;
  bool finished_ = false;
  absl::Status final_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::QueueCommand, v1::QueueReply>> rw_;
  // One reused command of each kind: no allocation per launch once warm.
  v1::QueueCommand launch_, wait_, ping_, copy_in_, copy_out_;
  v1::QueueReply reply_;
  uint64_t next_tag_ = 1;
  int pending_ = 0;
};

}  // namespace

std::unique_ptr<Queue::Transport> make_grpc_transport(std::shared_ptr<Connection> connection,
                                                      uint64_t queue) {
  return std::make_unique<GrpcTransport>(std::move(connection), queue);
}

absl::Status write_streamed(Connection& connection, uint64_t queue, const Buffer& buffer,
                            uint64_t offset, std::span<const std::byte> data) {
  grpc::ClientContext context;
  connection.attach(context);
  v1::WriteBufferResponse response;
  auto writer = connection.stub->WriteBuffer(&context, &response);
  v1::WriteBufferChunk chunk;
  chunk.set_queue(queue);
  chunk.set_buffer(buffer.handle);
  chunk.set_offset(offset);
  for (size_t done = 0; done < data.size();) {
    const size_t n = std::min<size_t>(kChunk, data.size() - done);
    chunk.set_data(reinterpret_cast<const char*>(data.data()) + done, n);
    if (!writer->Write(chunk)) break;
    chunk.clear_queue();
    chunk.clear_buffer();
    chunk.clear_offset();
    done += n;
  }
  writer->WritesDone();
  return from_grpc(writer->Finish());
}

absl::Status read_streamed(Connection& connection, uint64_t queue, const Buffer& buffer,
                           uint64_t offset, std::span<std::byte> data) {
  grpc::ClientContext context;
  connection.attach(context);
  v1::ReadBufferRequest request;
  request.set_queue(queue);
  request.set_buffer(buffer.handle);
  request.set_offset(offset);
  request.set_size(data.size());
  auto reader = connection.stub->ReadBuffer(&context, request);
  v1::BufferChunk chunk;
  size_t done = 0;
  while (reader->Read(&chunk)) {
    const std::string& d = chunk.data();
    if (d.size() > data.size() - done) {
      context.TryCancel();
      reader->Finish().ok();
      return absl::InternalError("kad returned more data than asked for");
    }
    std::memcpy(data.data() + done, d.data(), d.size());
    done += d.size();
  }
  absl::Status s = from_grpc(reader->Finish());
  if (s.ok() && done != data.size()) {
    return absl::InternalError(absl::StrFormat("kad returned %d of %d bytes", done, data.size()));
  }
  return s;
}

}  // namespace kad::client
