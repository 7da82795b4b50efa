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

bool is_launch(uint32_t op) {
  return op == static_cast<uint32_t>(shm::v1::Op::kRun) ||
         op == static_cast<uint32_t>(shm::v1::Op::kSubmit);
}

}  // namespace

bool same_plan(const SubmitRecord& key, const SubmitRecord& r) {
  if (!is_launch(r.op) || !is_launch(key.op) || r.flags != key.flags || r.kernel != key.kernel ||
      r.rank != key.rank || r.workgroup_rank != key.workgroup_rank || r.nargs != key.nargs)
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

void ServedChannel::hand_back(LentQueue& queue) {
  serving_ = false;
  QueueProgress& p = *progress_;
  // kad takes back a queue with nothing in flight; what failed stays with
  // the queue for kad's next wait to ask (watched by kad: the deadline).
  p.loan_answering.store(static_cast<uint32_t>(LoanTaking::kNone), std::memory_order_relaxed);
  queue.wait(p.loan_launches.load(std::memory_order_relaxed), /*report=*/false).IgnoreError();
  p.loan_submit_head.store(rings_->positions().submit_head, std::memory_order_relaxed);
  p.loan_completion_tail.store(rings_->positions().completion_tail, std::memory_order_relaxed);
  p.loan_owner.store(0, std::memory_order_seq_cst);
  futex_wake(&p.loan_owner);  // kad's channel thread sleeps there while it lends
}

bool ServedChannel::copy(LentQueue& queue) {
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
    // After the launches before it, as kad copies; one that failed makes
    // the copy kad's, which reports the failure as it does.
    queue.wait(progress_->loan_launches.load(std::memory_order_relaxed), /*report=*/false)
        .IgnoreError();
    if (progress_->failed.load(std::memory_order_acquire) != 0) return false;
    std::byte* buffer = queue.memory(plan_.launch.args[i].value, buffer_end);
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

void ServedChannel::take(LoanTaking what) {
  QueueProgress& p = *progress_;
  const uint32_t at = rings_->positions().submit_head;
  p.loan_tag.store(record_.tag, std::memory_order_relaxed);
  p.loan_taking.store(at, std::memory_order_relaxed);
  p.loan_answering.store(static_cast<uint32_t>(what), std::memory_order_relaxed);
  if (what == LoanTaking::kRun || what == LoanTaking::kSubmit)
    p.loan_launches.store(p.loan_launches.load(std::memory_order_relaxed) + 1,
                          std::memory_order_release);
  // Taken: from here kad answers it should this worker die, and goes on
  // past it. The words say so before the slot is freed: a worker killed in
  // between must not leave kad to run it again.
  p.loan_submit_head.store(at + 1, std::memory_order_release);
  rings_->consume();
  p.loan_records.store(p.loan_records.load(std::memory_order_relaxed) + 1,
                       std::memory_order_relaxed);
}

void ServedChannel::serve(LentQueue& queue) {
  if (!serving_) return;
  QueueProgress& p = *progress_;
  // A bounded batch: the worker's launch ring and kad's messages get their
  // turn between batches, however fast the client writes.
  for (int served = 0; served < kBatch; ++served) {
    if (p.loan_recall.load(std::memory_order_acquire) != 0) return hand_back(queue);
    const absl::StatusOr<uint32_t> waiting = rings_->records_waiting();
    // Indices out of range are kad's to report (it ends the channel).
    if (!waiting.ok()) return hand_back(queue);
    if (*waiting == 0) return;
    rings_->peek(&record_);
    const auto op = static_cast<shm::v1::Op>(record_.op);
    const bool launch = same_plan(plan_.key, record_);
    const uint64_t launched = p.loan_launches.load(std::memory_order_relaxed);
    const bool copies = op == shm::v1::Op::kCopyIn || op == shm::v1::Op::kCopyOut;
    const bool wait = op == shm::v1::Op::kWait && record_.event <= event_base_ + launched;
    if (!(launch || copies || wait || op == shm::v1::Op::kPing)) return hand_back(queue);
    if (launch && op == shm::v1::Op::kSubmit) {
      // Answered by no record: a failure waits for the next wait.
      take(LoanTaking::kSubmit);
      set_scalars();
      queue.submit(launch_);
      p.loan_answering.store(static_cast<uint32_t>(LoanTaking::kNone), std::memory_order_release);
      continue;
    }
    if (!rings_->completion_room()) return hand_back(queue);
    // A copy is done in place before the record is taken: one the worker
    // may not serve stays in the ring for kad, untouched.
    if (copies && !copy(queue)) return hand_back(queue);
    take(launch ? LoanTaking::kRun : wait ? LoanTaking::kWait : LoanTaking::kPingOrCopy);
    CompletionRecord& done = completion_.start(record_.tag);
    absl::Status status;
    if (launch) {
      set_scalars();
      queue.submit(launch_);
      status = queue.wait(launched + 1, /*report=*/true);
      done.event = event_base_ + launched + 1;
      done.linear = plan_.linear;
      done.index_bits = plan_.index_bits;
      done.rank = plan_.rank;
      done.workgroup_rank = plan_.workgroup_rank;
      std::memcpy(done.workgroup, plan_.workgroup, sizeof(done.workgroup));
    } else if (wait) {
      // Event 0: every launch so far; one before the loan ended before it.
      const uint64_t upto = record_.event == 0            ? launched
                            : record_.event > event_base_ ? record_.event - event_base_
                                                          : 0;
      status = queue.wait(upto, /*report=*/true);
    }
    completion_.finish(status);
    const absl::Status posted =
        rings_->post(completion_.record(), kPostWait, /*spin=*/false, [] { return true; });
    p.loan_completion_tail.store(rings_->positions().completion_tail, std::memory_order_release);
    p.loan_answering.store(static_cast<uint32_t>(LoanTaking::kNone), std::memory_order_release);
    if (!posted.ok()) return hand_back(queue);
  }
}

void ServedChannel::set_scalars() {
  for (uint32_t i = 0; i < plan_.key.nargs; ++i) {
    if (static_cast<shm::v1::ArgKind>(plan_.key.args[i].kind) == shm::v1::ArgKind::kScalar)
      launch_.args[i].value = record_.args[i].value;
  }
}

}  // namespace kad::server::worker
