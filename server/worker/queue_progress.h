// How far a worker's queue has come, in memory the daemon and the worker
// share (DESIGN §8): the worker reports each launch's end as it happens, and
// the daemon reads it there instead of asking over the socket. So a wait
// holds no lock while it sleeps (a session's other queues go on), a
// launch's deadline counts from the end of the launch before it, however
// deep the pipeline, and the device's scheduler learns of free slots
// without a round trip.
//
// One page per queue and worker: the daemon makes it (a sealed memfd) and
// sends it with kCreateQueue. The worker writes it; the daemon trusts
// nothing in it: `completed` is clamped to the launches it gave the worker,
// and `failed` only makes the daemon ask (kWait), whose answer is checked
// as any reply is.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/sealed_memfd.h"

namespace kad::server::worker {

struct QueueProgress {
  // Launches of this queue in this worker that have ended, counted from 1
  // as the daemon numbers them in the worker.
  std::atomic<uint64_t> completed{0};
  std::atomic<uint32_t> changes{0};  // bumped at every report: the futex word
  std::atomic<uint32_t> waiters{0};  // daemon threads asleep on `changes`
  // A launch failed (the driver refused it, or it ended in error): the
  // next wait that covers it asks the worker which and why.
  std::atomic<uint32_t> failed{0};
  // The launch (as `completed` counts) that a worker thread was running when
  // it faulted, written by the fault's handler as the worker dies
  // (fault_witness.h); 0: none. The daemon reads it only to say which
  // launch ended the worker, and only if it names one still in progress.
  std::atomic<uint64_t> faulted{0};

  // The direct path (direct_loan.h): the queue's shared-memory channel,
  // served by the worker itself while kad has lent it (kServeChannel). kad
  // sets `loan_owner` to 1 as it lends the channel; the worker sets it to 0
  // when it hands the channel back (and wakes kad, asleep on this word).
  alignas(64) std::atomic<uint32_t> loan_owner{0};
  std::atomic<uint32_t> loan_recall{0};  // kad: hand the channel back at the next record
  // The worker, as it serves: records taken since the loan, the launches
  // among them, and where it is in the channel's rings.
  std::atomic<uint64_t> loan_records{0};
  std::atomic<uint64_t> loan_launches{0};
  std::atomic<uint64_t> loan_bytes_in{0};   // copied into buffers (kCopyIn)
  std::atomic<uint64_t> loan_bytes_out{0};  // copied out of them (kCopyOut)
  std::atomic<uint32_t> loan_submit_head{0};
  std::atomic<uint32_t> loan_completion_tail{0};
  // The record the worker is taking (LoanTaking), from the ring position
  // `loan_taking` (its tag in `loan_tag`), until it is answered: should
  // the worker die then, kad answers it. The worker writes these, and
  // counts a launch in `loan_launches`, before it moves `loan_submit_head`
  // past the record: a head still at `loan_taking` says the record is
  // kad's to serve, and the launch counted for it never was one.
  std::atomic<uint32_t> loan_answering{0};
  std::atomic<uint32_t> loan_taking{0};
  std::atomic<uint64_t> loan_tag{0};
};

// What `loan_answering` says of the record being taken.
enum class LoanTaking : uint32_t {
  kNone = 0,
  kPingOrCopy = 1,  // done before it was taken: answered OK
  kRun = 2,         // the last launch counted, answered once it ends
  kSubmit = 3,      // the last launch counted, answered by no record
  kWait = 4,        // answered once the launches it waits for have ended
};

inline constexpr size_t kProgressBytes = 4096;
static_assert(sizeof(QueueProgress) <= kProgressBytes);

// A mapping of one queue's page.
class ProgressPage {
 public:
  // A new zeroed page (the daemon's side); fd() is what goes to the worker.
  static absl::StatusOr<std::shared_ptr<ProgressPage>> create();
  // The page whose memfd arrived with kCreateQueue (the worker's side); owns `fd`.
  static absl::StatusOr<std::shared_ptr<ProgressPage>> map(int fd);
  ProgressPage(const ProgressPage&) = delete;
  ProgressPage& operator=(const ProgressPage&) = delete;

  int fd() const { return memory_.fd(); }
  QueueProgress& progress() { return *progress_; }

  // The worker: launches up to `completed` have ended; wakes the daemon's
  // sleepers, if any. A report below one made already changes nothing.
  void report(uint64_t completed);
  // The worker: a launch failed (before its end is reported).
  void report_failure();
  // Wakes every sleeper at once (the daemon, when the worker is lost).
  void wake_all();
  // The daemon: sleeps until `changes` differs from `seen` or `timeout`
  // passes, without spinning (a kernel may run for seconds).
  void sleep_while_unchanged(uint32_t seen, absl::Duration timeout);

 private:
  explicit ProgressPage(SharedMapping memory)
      : memory_(std::move(memory)), progress_(static_cast<QueueProgress*>(memory_.data())) {}
  SharedMapping memory_;
  QueueProgress* progress_;
};

}  // namespace kad::server::worker
