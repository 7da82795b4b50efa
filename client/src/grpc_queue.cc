// A queue over one gRPC Submit stream: launches, waits and small copies in
// order; answers read in order. Submitted launches travel in batches
// (LaunchBatch, one message and one answer for up to kBatchLaunches), so that
// a pipelining client pays gRPC's per-message cost once per batch.
#include <array>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "client/src/connection.h"

namespace kad::client {
namespace {

class GrpcTransport final : public Queue::Transport {
 public:
  GrpcTransport(std::shared_ptr<Connection> connection, uint64_t queue)
      : connection_(std::move(connection)), queue_(queue) {
    connection_->attach(context_);
    rw_ = connection_->stub->Submit(&context_);
    batch_.set_queue(queue_);
    spare_.reserve(Queue::kBatchLaunches);
  }
  ~GrpcTransport() override {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    if (flusher_.joinable()) flusher_.join();
    {
      absl::MutexLock lock(&mu_);
      // Launches submitted and not yet sent still go: the queue's owner
      // left without waiting, as it may.
      if (!finished_ && batched() > 0) flush_locked(/*more_follows=*/false).ok();
      while (pending_ > 0 && read_pending().ok()) {
      }
      if (!finished_) {
        rw_->WritesDone();
        rw_->Finish().ok();
      }
    }
    for (v1::Launch* l : spare_) delete l;
  }

  bool shared_memory() const override { return false; }

  absl::StatusOr<LaunchInfo> launch(const Kernel& kernel, const Dims* ndrange,
                                    const Dims* workgroup, std::span<const Arg> args,
                                    const Dims* offsets) override {
    absl::MutexLock lock(&mu_);
    encode_launch(launch_.mutable_launch(), kernel, ndrange, workgroup, args, offsets);
    if (absl::Status s = roundtrip(launch_); !s.ok()) return s;
    return launch_info();
  }

  absl::StatusOr<LaunchInfo> run(const Kernel& kernel, const Dims* ndrange, const Dims* workgroup,
                                 std::span<const Arg> args, const Dims* offsets) override {
    absl::MutexLock lock(&mu_);
    encode_launch(run_.mutable_run(), kernel, ndrange, workgroup, args, offsets);
    absl::Status s = roundtrip(run_);
    return after_run(s.ok() ? absl::StatusOr<LaunchInfo>(launch_info()) : s);
  }

  absl::Status submit(const Kernel& kernel, const Dims* ndrange, const Dims* workgroup,
                      std::span<const Arg> args, const Dims* offsets) override {
    absl::MutexLock lock(&mu_);
    if (finished_) return final_;
    if (batched() >= Queue::kBatchLaunches) {
      if (absl::Status s = flush_locked(/*more_follows=*/false); !s.ok()) return s;
    }
    if (pending_ >= Queue::kMaxInFlight) {
      if (absl::Status s = read_pending(); !s.ok()) return s;
    }
    encode_launch(next_batch_slot(), kernel, ndrange, workgroup, args, offsets);
    if (batched() == 1) {
      batch_first_ = submitted_ + 1;
      if (!flusher_.joinable()) flusher_ = std::thread([this] { flush_late(); });
    }
    ++submitted_;
    return absl::OkStatus();
  }

  absl::Status wait(uint64_t event) override {
    absl::MutexLock lock(&mu_);
    wait_.mutable_wait()->set_event(event);
    return after_wait(roundtrip(wait_));
  }

  absl::Status ping() override {
    absl::MutexLock lock(&mu_);
    ping_.mutable_ping();
    return roundtrip(ping_);
  }

  absl::Status write(const Buffer& buffer, uint64_t offset,
                     std::span<const std::byte> data) override {
    absl::MutexLock lock(&mu_);
    if (data.size() > kChunk) {
      if (absl::Status s = before_streamed_copy(); !s.ok()) return s;
      return write_streamed(*connection_, queue_, buffer, offset, data);
    }
    v1::CopyIn* c = copy_in_.mutable_copy_in();
    c->set_buffer(buffer.handle);
    c->set_offset(offset);
    c->set_data(reinterpret_cast<const char*>(data.data()), data.size());
    return roundtrip(copy_in_);
  }

  absl::Status read(const Buffer& buffer, uint64_t offset, std::span<std::byte> data) override {
    absl::MutexLock lock(&mu_);
    if (data.size() > kChunk) {
      if (absl::Status s = before_streamed_copy(); !s.ok()) return s;
      return read_streamed(*connection_, queue_, buffer, offset, data);
    }
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
  int batched() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return batch_.batch().launches_size(); }

  // The stream ended: its status (Finish, once per stream), kept for every
  // later call.
  absl::Status closed() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!finished_) {
      finished_ = true;
      final_ = connection_->status_of(rw_->Finish());
      if (final_.ok()) {
        constexpr char kClosed[] = "the queue's stream to kad closed";
        final_ = absl::UnavailableError(connection_->session_lost(absl::Milliseconds(100))
                                            ? connection_->session_gone(kClosed)
                                            : std::string(kClosed));
      }
    }
    return final_;
  }

  LaunchInfo launch_info() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
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

  // The batch's next launch record: a spare one from an earlier batch when
  // there is one, so that a warm batch allocates nothing (a cleared Launch
  // would free its submessages; spares keep them).
  v1::Launch* next_batch_slot() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto* launches = batch_.mutable_batch()->mutable_launches();
    if (spare_.empty()) return launches->Add();
    v1::Launch* l = spare_.back();
    spare_.pop_back();
    launches->AddAllocated(l);
    return l;
  }

  // Writes the batch; its launch records go back to the spares. With
  // `more_follows`, gRPC may hold the bytes for the write that follows at
  // once (a wait, a run), so that both leave in one send.
  absl::Status flush_locked(bool more_follows) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const int n = batched();
    batch_.set_tag(next_tag_++);
    const bool written =
        !finished_ && rw_->Write(batch_, more_follows ? grpc::WriteOptions().set_buffer_hint()
                                                      : grpc::WriteOptions());
    auto* launches = batch_.mutable_batch()->mutable_launches();
    const size_t had = spare_.size();
    spare_.resize(had + static_cast<size_t>(n));  // within the reserved capacity
    launches->ExtractSubrange(0, n, spare_.data() + had);
    ++generation_;
    if (!written) return closed();
    batch_firsts_[batches_sent_++ % batch_firsts_.size()] = batch_first_;
    ++pending_;
    return absl::OkStatus();
  }

  // Before a large copy, which travels on a call of its own (WriteBuffer,
  // ReadBuffer): a round trip on this stream, so that kad has taken every
  // launch submitted before it (it then waits for them as for any copy).
  absl::Status before_streamed_copy() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (submitted_ == submitted_at_last_ping_) return absl::OkStatus();
    ping_.mutable_ping();
    if (absl::Status s = roundtrip(ping_); !s.ok()) return s;
    submitted_at_last_ping_ = submitted_;
    return absl::OkStatus();
  }

  // The flusher thread: a batch that nobody fills or sends leaves
  // kFlushAfter after its first launch, so that a client that submits and
  // then computes on the host still has its launches run meanwhile.
  void flush_late() {
    absl::MutexLock lock(&mu_);
    for (;;) {
      mu_.Await(absl::Condition(
          +[](GrpcTransport* t)
               ABSL_NO_THREAD_SAFETY_ANALYSIS { return t->stopping_ || t->batched() > 0; },
          this));
      if (stopping_) return;
      watched_ = generation_;
      mu_.AwaitWithTimeout(absl::Condition(
                               +[](GrpcTransport* t) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                 return t->stopping_ || t->generation_ != t->watched_;
                               },
                               this),
                           Queue::kFlushAfter);
      if (stopping_) return;
      if (generation_ == watched_ && batched() > 0 && !finished_) flush_locked(false).ok();
    }
  }

  // Fills `l` in place: its submessages and argument records are kept
  // from launch to launch (Clear() would free them), so a warm launch
  // allocates nothing. A submessage is dropped only when a launch leaves it
  // unset where the last one set it.
  void encode_launch(v1::Launch* l, const Kernel& kernel, const Dims* ndrange,
                     const Dims* workgroup, std::span<const Arg> args, const Dims* offsets) {
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

  // Reads one answer to a sent batch; keeps the first error, naming the
  // launch by its place among this queue's submitted launches.
  absl::Status read_pending() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_ || !rw_->Read(&reply_)) {
      pending_ = 0;
      return closed();
    }
    --pending_;
    const uint64_t first = batch_firsts_[batches_read_++ % batch_firsts_.size()];
    if (reply_.code() != 0) {
      defer(static_cast<absl::StatusCode>(reply_.code()),
            absl::StrFormat("launch %d submitted on this queue: %s", first + reply_.failed_index(),
                            reply_.message()));
    }
    return absl::OkStatus();
  }

  // Sends the batch and `command` (in one send where gRPC allows), reads
  // its answer into reply_ (after the answers still owed to batches: they
  // come first, in order).
  absl::Status roundtrip(v1::QueueCommand& command) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return final_;
    if (batched() > 0) {
      if (absl::Status s = flush_locked(/*more_follows=*/true); !s.ok()) return s;
    }
    command.set_queue(queue_);
    command.set_tag(next_tag_++);
    if (!rw_->Write(command)) return closed();
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
  const uint64_t queue_;
  grpc::ClientContext context_;
  // One user thread at a time, and the flusher: every use of the stream and
  // of what follows is under mu_.
  absl::Mutex mu_;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status final_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<grpc::ClientReaderWriter<v1::QueueCommand, v1::QueueReply>> rw_;
  // One reused command of each kind: no allocation per launch once warm.
  v1::QueueCommand launch_, run_, wait_, ping_, copy_in_, copy_out_;
  v1::QueueCommand batch_ ABSL_GUARDED_BY(mu_);          // the launches submitted and not yet sent
  std::vector<v1::Launch*> spare_ ABSL_GUARDED_BY(mu_);  // owned launch records for batch_
  v1::QueueReply reply_ ABSL_GUARDED_BY(mu_);
  uint64_t next_tag_ ABSL_GUARDED_BY(mu_) = 1;
  int pending_ ABSL_GUARDED_BY(mu_) = 0;  // batches and commands sent, answers not read
  // Launches submitted on this queue, and the first of the batch being
  // filled; the first launch of each batch whose answer is unread.
  uint64_t submitted_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t batch_first_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t submitted_at_last_ping_ ABSL_GUARDED_BY(mu_) = 0;  // before_streamed_copy's
  std::array<uint64_t, Queue::kMaxInFlight + 1> batch_firsts_ ABSL_GUARDED_BY(mu_){};
  uint64_t batches_sent_ ABSL_GUARDED_BY(mu_) = 0, batches_read_ ABSL_GUARDED_BY(mu_) = 0;
  // The flusher: batches sent so far, and the one it watches.
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0, watched_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread flusher_;
};

}  // namespace

std::unique_ptr<Queue::Transport> make_grpc_transport(std::shared_ptr<Connection> connection,
                                                      uint64_t queue) {
  return std::make_unique<GrpcTransport>(std::move(connection), queue);
}

}  // namespace kad::client
