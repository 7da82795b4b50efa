// A queue's own thread for its launches, in a worker whose driver runs each
// kernel inside its enqueue (PoCL's `basic`, DESIGN §8). There the thread
// that enqueues is the thread that computes: were it the worker's request
// loop, every request of the session (an allocation, a load, its other
// queues' launches) would wait for the kernel in progress.
//
// The request loop decodes each launch, resolves its handles (the tables
// are the loop's own) and hands it over here; the executor runs the queue's
// launches one after the other, in order, and says each one's end. The
// buffers a launch names stay mapped until it has run, whatever the loop
// frees meanwhile. At most kSlots launches wait: a loop that hands over one
// more waits for a slot (kad's wait for the loop's answers follows the
// launches in progress: WorkerOptions::kernels_hold_requests).
//
// A hand-over costs a wake-up and a switch between threads per launch:
// on 2 cores a synchronous launch through a worker took 30 µs instead of
// 17, and 32 clients made 17k launches/s instead of 26k. So a launch runs
// on the loop's own thread unless its kernel's last launch says it is worth
// the hand-over (wants_executor) or the executor still has launches of the
// queue to run (they go first). Only a kernel's first long launch holds
// the loop (and it is as long as kLongLaunch, or a kernel that starts long).
//
// Where the worker has a wide device beside it (PoCL's `pthread`, which
// spreads a kernel's work-groups over every core, on the same memory), the
// executor runs there the launches of several work-groups of a kernel that
// measured faster there, and now and then tries the other device again
// (wide_choice.h). The others keep the driver that runs them without a
// hand-off to a pool and back.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "core/backend.h"
#include "core/kernel.h"
#include "core/launch_context.h"
#include "core/launch_geometry.h"
#include "core/launch_request.h"
#include "server/worker/fault_witness.h"
#include "server/worker/wide_choice.h"

namespace kad::server::worker {

// What decides where a kernel's next launch runs: how its last one went,
// and its build for the wide device, asked of kad when it first wants to go
// there (wide_builds.h).
class ExecutedKernel {
 public:
  virtual ~ExecutedKernel() = default;
  // Null until kad hands the build over, away from the launches (they stay
  // narrow meanwhile), and where there is none (wide_choice is then ruled out).
  virtual CompiledKernel* wide() = 0;

  std::atomic<int64_t> last_ns{0};  // its last launch's time, enqueue to end
  WideChoice wide_choice;           // for its launches of several work-groups
};

// One launch, resolved and ready to run.
struct PreparedLaunch {
  CompiledKernel* kernel = nullptr;
  ExecutedKernel* record = nullptr;
  // The buffers of `args`, as the wide device knows them (null: none).
  std::array<Buffer*, kMaxKernelArgs> wide_buffers;
  LaunchGeometry geometry;
  LaunchContext context;
  uint32_t nargs = 0;
  uint32_t nheld = 0;
  std::array<KernelArg, kMaxKernelArgs> args;
  // What keeps the buffers in `args` mapped until the launch has run.
  std::array<std::shared_ptr<const void>, kMaxKernelArgs> held;
};

class LaunchExecutor {
 public:
  static constexpr uint64_t kSlots = 64;
  // A kernel whose last launch ran this long runs on the executor.
  static constexpr int64_t kLongLaunch = 1'000'000;  // ns

  // `has_wide`: run() is given a queue on the wide device.
  explicit LaunchExecutor(bool has_wide)
      : has_wide_(has_wide), slots_(new PreparedLaunch[kSlots]) {}
  LaunchExecutor(const LaunchExecutor&) = delete;
  LaunchExecutor& operator=(const LaunchExecutor&) = delete;

  // The request loop: the slot for the next launch, once one is free (it
  // sleeps while all kSlots wait); publish() hands it over.
  PreparedLaunch& next_slot();
  void publish();
  // The request loop: whether the launch in the slot from next_slot() may
  // run on its own thread (run_here): none waits for the executor, and its
  // kernel's last launch does not want the executor.
  bool may_run_here(const PreparedLaunch& launch) const {
    return published_.load(std::memory_order_acquire) == done_.load(std::memory_order_acquire) &&
           !wants_executor(launch);
  }
  // The request loop, where may_run_here() said so: runs the launch in the
  // slot from next_slot() and reports it as run() does.
  template <typename Report>
  void run_here(Queue& queue, Report report);
  // The request loop: no launch follows; the executor ends once it has run
  // those handed over.
  void release();

  // The executor's thread: runs each launch on `queue`, or on `wide` (the
  // queue on the wide device) where it gains from every core, in turn; for
  // the n-th (from 1), once it has run, calls `report.failed(n, status)`
  // with the driver's refusal or the kernel's failure, if any, then
  // `report.ended(n)`; while it runs, a fault of this thread writes n into
  // `*report.faulted()` (fault_witness.h). Returns after release(), once
  // every launch handed over has run.
  template <typename Report>
  void run(Queue& queue, Queue* wide, Report report);

 private:
  static uint64_t groups(const PreparedLaunch& launch) {
    return launch.geometry.groups[0] * launch.geometry.groups[1] * launch.geometry.groups[2];
  }
  static uint64_t items(const PreparedLaunch& launch) {
    return groups(launch) * launch.geometry.items[0] * launch.geometry.items[1] *
           launch.geometry.items[2];
  }
  // Whether the launch runs on the wide device (wide_choice.h).
  bool runs_wide(const PreparedLaunch& launch) const {
    return has_wide_ && launch.record->wide_choice.runs_wide(groups(launch));
  }
  // Long launches, and those that run on the wide device or try one core
  // again for a kernel that is there, run on the executor.
  bool wants_executor(const PreparedLaunch& launch) const {
    return launch.record->last_ns.load(std::memory_order_relaxed) >= kLongLaunch ||
           (has_wide_ && launch.record->wide_choice.involves_wide(groups(launch)));
  }
  // Sleeps on `word` while it reads `seen`, with `sleeping` set for the
  // other side to wake it.
  static void sleep_on(std::atomic<uint32_t>& word, uint32_t seen, std::atomic<uint32_t>& sleeping);
  static void wake(std::atomic<uint32_t>& word, std::atomic<uint32_t>& sleeping);
  // Runs `launch` (on `wide` if given and it gains), notes how long it
  // took in its kernel's record, and lets go of its buffers: the slot is
  // free then. Returns the driver's refusal or the kernel's failure, if any.
  absl::Status run_one(Queue& queue, Queue* wide, PreparedLaunch& launch);
  static void enqueue_and_wait(Queue& queue, CompiledKernel& kernel, PreparedLaunch& launch,
                               absl::Status* status);
  // The wide device's kernel for `launch`, with its buffers swapped in; null
  // where it stays on the narrow device.
  static CompiledKernel* go_wide(PreparedLaunch& launch);
  // This thread's CPU time.
  static int64_t thread_cpu_ns();

  const bool has_wide_;
  std::unique_ptr<PreparedLaunch[]> slots_;
  uint64_t next_ = 0;  // the request loop's count of launches handed over
  std::atomic<uint64_t> published_{0};
  std::atomic<uint64_t> done_{0};
  std::atomic<bool> released_{false};
  // Futex words (the low bits of the counts) and who sleeps on them.
  std::atomic<uint32_t> published_word_{0};
  std::atomic<uint32_t> done_word_{0};
  std::atomic<uint32_t> executor_sleeping_{0};
  std::atomic<uint32_t> loop_sleeping_{0};
};

template <typename Report>
void LaunchExecutor::run(Queue& queue, Queue* wide, Report report) {
  for (;;) {
    const uint32_t seen = published_word_.load(std::memory_order_seq_cst);
    // `published_` first: run_here() stores `done_` before it, so a count
    // read here is never ahead of the launches done.
    const uint64_t published = published_.load(std::memory_order_seq_cst);
    const uint64_t done = done_.load(std::memory_order_seq_cst);
    if (published <= done) {
      if (released_.load(std::memory_order_acquire)) return;
      sleep_on(published_word_, seen, executor_sleeping_);
      continue;
    }
    absl::Status status;
    {
      const RunningLaunch running(report.faulted(), done + 1);
      status = run_one(queue, wide, slots_[done % kSlots]);
    }
    // Its failure is noted before the loop may run the next launch, and
    // the launch is done before its end is reported: a launch the client
    // sends once it sees this end finds the executor idle (may_run_here).
    if (!status.ok()) report.failed(done + 1, status);
    done_.store(done + 1, std::memory_order_seq_cst);
    done_word_.store(static_cast<uint32_t>(done + 1), std::memory_order_seq_cst);
    wake(done_word_, loop_sleeping_);
    report.ended(done + 1);
  }
}

template <typename Report>
void LaunchExecutor::run_here(Queue& queue, Report report) {
  const uint64_t n = next_ + 1;
  absl::Status status;
  {
    const RunningLaunch running(report.faulted(), n);
    status = run_one(queue, nullptr, slots_[next_ % kSlots]);
  }
  next_ = n;
  // The executor sleeps (nothing was waiting for it) and need not wake.
  done_.store(n, std::memory_order_seq_cst);
  published_.store(n, std::memory_order_seq_cst);
  if (!status.ok()) report.failed(n, status);
  report.ended(n);
}

}  // namespace kad::server::worker
