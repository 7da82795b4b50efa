#include "server/worker/served_channel.h"

#include <cstring>

#include "kad/shm/v1/ring.h"

namespace kad::server::worker {

using shm::v1::CompletionRecord;
using shm::v1::futex_wake;
using shm::v1::kChannelBytes;
using shm::v1::kHasOffsets;
using shm::v1::kHasWorkgroup;
using shm::v1::SubmitRecord;

namespace {

// How long the worker waits for room to answer: never in practice, since
// it answers only where it saw room and only it posts while it serves.
constexpr absl::Duration kPostWait = absl::Seconds(1);
constexpr int kBatch = 64;

}  // namespace

bool same_plan(const SubmitRecord& key, const SubmitRecord& r) {
  if (r.op != key.op || r.flags != key.flags || r.kernel != key.kernel || r.rank != key.rank ||
      r.workgroup_rank != key.workgroup_rank || r.nargs != key.nargs)
    return false;
  // The key's sizes are ones kad decoded: within the record's arrays.
  for (uint32_t d = 0; d < key.rank; ++d) {
    if (r.extents[d] != key.extents[d]) return false;
    if ((key.flags & kHasOffsets) != 0 && r.offsets[d] != key.offsets[d]) return false;
  }
  if ((key.flags & kHasWorkgroup) != 0) {
    for (uint32_t d = 0; d < key.workgroup_rank; ++d)
      if (r.workgroup[d] != key.workgroup[d]) return false;
  }
  for (uint32_t i = 0; i < key.nargs; ++i) {
    const shm::v1::ArgRecord& a = r.args[i];
    const shm::v1::ArgRecord& k = key.args[i];
    if (a.kind != k.kind || a.scalar != k.scalar) return false;
    // A buffer's handle and a local size are what kad checked; a scalar's
    // bits are the launch's own.
    if (static_cast<shm::v1::ArgKind>(k.kind) != shm::v1::ArgKind::kScalar && a.value != k.value)
      return false;
  }
  return true;
}

absl::StatusOr<std::unique_ptr<ServedChannel>> ServedChannel::map(int fd) {
  absl::StatusOr<SharedMapping> m = SharedMapping::map(fd, kChannelBytes, "a lent channel");
  if (!m.ok()) return m.status();
  return std::unique_ptr<ServedChannel>(new ServedChannel(*std::move(m)));
}

void ServedChannel::lend(const ServeChannelRecord& loan, QueueProgress* progress) {
  rings_.emplace(memory_.data(), RingPositions{loan.submit_head, loan.completion_tail});
  progress_ = progress;
  event_base_ = loan.event_base;
  plan_ = loan.plan;
  std::memcpy(&launch_, &plan_.launch, sizeof(launch_));
  serving_ = true;
}

bool ServedChannel::has_work() const {
  if (!serving_) return false;
  return progress_->loan_recall.load(std::memory_order_acquire) != 0 ||
         rings_->header().submit.tail.load(std::memory_order_acquire) !=
             rings_->positions().submit_head;
}

bool ServedChannel::client_spins() const {
  return serving_ && rings_->header().sleep_at_once.load(std::memory_order_relaxed) == 0;
}

void ServedChannel::hand_back() {
  serving_ = false;
  QueueProgress& p = *progress_;
  p.loan_submit_head.store(rings_->positions().submit_head, std::memory_order_relaxed);
  p.loan_completion_tail.store(rings_->positions().completion_tail, std::memory_order_relaxed);
  p.loan_owner.store(0, std::memory_order_seq_cst);
  futex_wake(&p.loan_owner);  // kad's channel thread sleeps there while it lends
}

bool ServedChannel::copy(absl::FunctionRef<std::byte*(uint64_t id, uint64_t end)> memory) {
  const bool in = record_.op == static_cast<uint32_t>(shm::v1::Op::kCopyIn);
  // Empty copies and anything out of range are kad's to answer (and word).
  uint64_t arena_end, buffer_end;
  if (record_.size == 0 || __builtin_add_overflow(record_.arena_offset, record_.size, &arena_end) ||
      arena_end > shm::v1::kArenaBytes ||
      __builtin_add_overflow(record_.offset, record_.size, &buffer_end))
    return false;
  for (uint32_t i = 0; i < plan_.key.nargs; ++i) {
    const shm::v1::ArgRecord& a = plan_.key.args[i];
    if (static_cast<shm::v1::ArgKind>(a.kind) != shm::v1::ArgKind::kBuffer ||
        a.value != record_.buffer)
      continue;
    if (buffer_end > plan_.buffer_bytes[i]) return false;
    std::byte* buffer = memory(plan_.launch.args[i].value, buffer_end);
    if (buffer == nullptr) return false;
    std::byte* arena = rings_->arena() + record_.arena_offset;
    QueueProgress& p = *progress_;
    if (in) {
      std::memcpy(buffer + record_.offset, arena, record_.size);
      p.loan_bytes_in.store(p.loan_bytes_in.load(std::memory_order_relaxed) + record_.size,
                            std::memory_order_release);
    } else {
      std::memcpy(arena, buffer + record_.offset, record_.size);
      p.loan_bytes_out.store(p.loan_bytes_out.load(std::memory_order_relaxed) + record_.size,
                             std::memory_order_release);
    }
    return true;
  }
  return false;
}

void ServedChannel::serve(absl::FunctionRef<absl::Status(const LaunchRecord&)> run,
                          absl::FunctionRef<std::byte*(uint64_t id, uint64_t end)> memory) {
  if (!serving_) return;
  QueueProgress& p = *progress_;
  // A bounded batch: the worker's launch ring and kad's messages get their
  // turn between batches, however fast the client writes.
  for (int served = 0; served < kBatch; ++served) {
    if (p.loan_recall.load(std::memory_order_acquire) != 0) return hand_back();
    const absl::StatusOr<uint32_t> waiting = rings_->records_waiting();
    // Indices out of range are kad's to report (it ends the channel).
    if (!waiting.ok()) return hand_back();
    if (*waiting == 0) return;
    rings_->peek(&record_);
    const auto op = static_cast<shm::v1::Op>(record_.op);
    const bool launch = op == shm::v1::Op::kRun && same_plan(plan_.key, record_);
    const uint64_t launched = event_base_ + p.loan_launches.load(std::memory_order_relaxed);
    const bool copies = op == shm::v1::Op::kCopyIn || op == shm::v1::Op::kCopyOut;
    const bool servable = launch || copies || op == shm::v1::Op::kPing ||
                          (op == shm::v1::Op::kWait && record_.event <= launched);
    if (!servable || !rings_->completion_room()) return hand_back();
    // A copy is done in place before the record is taken: one the worker
    // may not serve stays in the ring for kad, untouched.
    if (copies && !copy(memory)) return hand_back();
    // Taken: from here until it is answered, kad answers it should this
    // worker die, and goes on past it. The words say so before the slot is
    // freed: a worker killed in between must not leave kad to run it again.
    p.loan_tag.store(record_.tag, std::memory_order_relaxed);
    p.loan_answering.store(launch ? 2 : 1, std::memory_order_relaxed);
    p.loan_submit_head.store(rings_->positions().submit_head + 1, std::memory_order_release);
    rings_->consume();
    p.loan_records.store(p.loan_records.load(std::memory_order_relaxed) + 1,
                         std::memory_order_relaxed);
    CompletionRecord& done = completion_.start(record_.tag);
    absl::Status status;
    if (launch) {
      const uint64_t n = p.loan_launches.load(std::memory_order_relaxed) + 1;
      p.loan_launches.store(n, std::memory_order_release);
      for (uint32_t i = 0; i < plan_.key.nargs; ++i) {
        if (static_cast<shm::v1::ArgKind>(plan_.key.args[i].kind) == shm::v1::ArgKind::kScalar)
          launch_.args[i].value = record_.args[i].value;
      }
      status = run(launch_);
      done.event = event_base_ + n;
      done.linear = plan_.linear;
      done.index_bits = plan_.index_bits;
      done.rank = plan_.rank;
      done.workgroup_rank = plan_.workgroup_rank;
      std::memcpy(done.workgroup, plan_.workgroup, sizeof(done.workgroup));
    }
    completion_.finish(status);
    const absl::Status posted =
        rings_->post(completion_.record(), kPostWait, /*spin=*/false, [] { return true; });
    p.loan_completion_tail.store(rings_->positions().completion_tail, std::memory_order_release);
    p.loan_answering.store(0, std::memory_order_release);
    if (!posted.ok()) return hand_back();
  }
}

}  // namespace kad::server::worker
