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
// on the loop's own thread while the queue's launches are short: nothing
// waits for the executor and the last launch ran under kLongLaunch. A
// longer one moves the queue's next launches to the executor, until one of
// them is short again. Only a queue's first long launch holds the loop
// (and it is as long as kLongLaunch, or a kernel that starts long).
#pragma once

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

namespace kad::server::worker {

// One launch, resolved and ready to run.
struct PreparedLaunch {
  CompiledKernel* kernel = nullptr;
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
  static constexpr std::chrono::steady_clock::duration kLongLaunch = std::chrono::milliseconds(1);

  LaunchExecutor() : slots_(new PreparedLaunch[kSlots]) {}
  LaunchExecutor(const LaunchExecutor&) = delete;
  LaunchExecutor& operator=(const LaunchExecutor&) = delete;

  // The request loop: the slot for the next launch, once one is free (it
  // sleeps while all kSlots wait); publish() hands it over.
  PreparedLaunch& next_slot();
  void publish();
  // The request loop: whether the next launch may run on its own thread
  // (run_here): none waits for the executor, and the last one was short.
  bool may_run_here() const {
    return published_.load(std::memory_order_acquire) == done_.load(std::memory_order_acquire) &&
           !last_long_.load(std::memory_order_relaxed);
  }
  // The request loop, where may_run_here() said so: runs the launch in the
  // slot from next_slot() and calls `ended(n, status)` as run() would.
  template <typename Ended>
  void run_here(Queue& queue, Ended ended);
  // The request loop: no launch follows; the executor ends once it has run
  // those handed over.
  void release();

  // The executor's thread: runs each launch on `queue` in turn and calls
  // `ended(n, status)` for the n-th (from 1) once it has run, with the
  // driver's refusal or the kernel's failure, if any. Returns after
  // release(), once every launch handed over has run.
  template <typename Ended>
  void run(Queue& queue, Ended ended);

 private:
  // Sleeps on `word` while it reads `seen`, with `sleeping` set for the
  // other side to wake it.
  static void sleep_on(std::atomic<uint32_t>& word, uint32_t seen, std::atomic<uint32_t>& sleeping);
  static void wake(std::atomic<uint32_t>& word, std::atomic<uint32_t>& sleeping);
  // Runs `launch`, notes whether it was long, and lets go of its buffers
  // once `ended` was called.
  template <typename Ended>
  void run_one(Queue& queue, PreparedLaunch& launch, uint64_t n, Ended& ended);
  void enqueue_and_wait(Queue& queue, PreparedLaunch& launch, absl::Status* status);

  std::unique_ptr<PreparedLaunch[]> slots_;
  uint64_t next_ = 0;  // the request loop's count of launches handed over
  std::atomic<uint64_t> published_{0};
  std::atomic<uint64_t> done_{0};
  std::atomic<bool> released_{false};
  std::atomic<bool> last_long_{false};
  // Futex words (the low bits of the counts) and who sleeps on them.
  std::atomic<uint32_t> published_word_{0};
  std::atomic<uint32_t> done_word_{0};
  std::atomic<uint32_t> executor_sleeping_{0};
  std::atomic<uint32_t> loop_sleeping_{0};
};

template <typename Ended>
void LaunchExecutor::run_one(Queue& queue, PreparedLaunch& launch, uint64_t n, Ended& ended) {
  const auto start = std::chrono::steady_clock::now();
  absl::Status status;
  enqueue_and_wait(queue, launch, &status);
  last_long_.store(std::chrono::steady_clock::now() - start >= kLongLaunch,
                   std::memory_order_relaxed);
  ended(n, status);
  // The buffers go (where the loop freed them) before the slot is free.
  for (uint32_t i = 0; i < launch.nheld; ++i) launch.held[i].reset();
  launch.nheld = 0;
}

template <typename Ended>
void LaunchExecutor::run(Queue& queue, Ended ended) {
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
    run_one(queue, slots_[done % kSlots], done + 1, ended);
    done_.store(done + 1, std::memory_order_seq_cst);
    done_word_.store(static_cast<uint32_t>(done + 1), std::memory_order_seq_cst);
    wake(done_word_, loop_sleeping_);
  }
}

template <typename Ended>
void LaunchExecutor::run_here(Queue& queue, Ended ended) {
  const uint64_t n = next_ + 1;
  run_one(queue, slots_[next_ % kSlots], n, ended);
  next_ = n;
  // The executor sleeps (nothing was waiting for it) and need not wake.
  done_.store(n, std::memory_order_seq_cst);
  published_.store(n, std::memory_order_seq_cst);
}

}  // namespace kad::server::worker
