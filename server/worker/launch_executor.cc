#include "server/worker/launch_executor.h"

#include <time.h>

#include <span>

#include "kad/shm/v1/ring.h"

namespace kad::server::worker {

PreparedLaunch& LaunchExecutor::next_slot() {
  for (;;) {
    const uint32_t seen = done_word_.load(std::memory_order_seq_cst);
    if (next_ - done_.load(std::memory_order_acquire) < kSlots) return slots_[next_ % kSlots];
    sleep_on(done_word_, seen, loop_sleeping_);
  }
}

void LaunchExecutor::publish() {
  ++next_;
  published_.store(next_, std::memory_order_seq_cst);
  published_word_.store(static_cast<uint32_t>(next_), std::memory_order_seq_cst);
  wake(published_word_, executor_sleeping_);
}

void LaunchExecutor::release() {
  released_.store(true, std::memory_order_seq_cst);
  published_word_.fetch_add(1, std::memory_order_seq_cst);
  wake(published_word_, executor_sleeping_);
}

void LaunchExecutor::sleep_on(std::atomic<uint32_t>& word, uint32_t seen,
                              std::atomic<uint32_t>& sleeping) {
  sleeping.store(1, std::memory_order_seq_cst);
  // A change after `seen` was read (the other side stores the word, then
  // looks at `sleeping`) is seen here, or the other side sees `sleeping`
  // and wakes this one: no wake-up is lost.
  if (word.load(std::memory_order_seq_cst) == seen) shm::v1::futex_wait(&word, seen, -1);
  sleeping.store(0, std::memory_order_relaxed);
}

void LaunchExecutor::wake(std::atomic<uint32_t>& word, std::atomic<uint32_t>& sleeping) {
  if (sleeping.load(std::memory_order_seq_cst) != 0) shm::v1::futex_wake(&word);
}

int64_t LaunchExecutor::thread_cpu_ns() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
}

absl::Status LaunchExecutor::run_one(Queue& queue, Queue* wide, PreparedLaunch& launch) {
  absl::Status status;
  CompiledKernel* wide_kernel = wide != nullptr && runs_wide(launch) ? go_wide(launch) : nullptr;
  ExecutedKernel& k = *launch.record;
  // On the narrow device the kernel runs in this thread (wide_choice.h).
  const bool cpu_timed =
      wide_kernel == nullptr && has_wide_ && k.wide_choice.wants_cpu_time(groups(launch));
  const int64_t cpu_start = cpu_timed ? thread_cpu_ns() : 0;
  const auto start = std::chrono::steady_clock::now();
  if (wide_kernel != nullptr) {
    enqueue_and_wait(*wide, *wide_kernel, launch, &status);
  } else {
    enqueue_and_wait(queue, *launch.kernel, launch, &status);
  }
  const int64_t took =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count();
  k.last_ns.store(took, std::memory_order_relaxed);
  if (has_wide_)
    k.wide_choice.note(wide_kernel != nullptr, groups(launch), items(launch), took,
                       cpu_timed ? thread_cpu_ns() - cpu_start : -1);
  // The buffers go (where the loop freed them) before the slot is free.
  for (uint32_t i = 0; i < launch.nheld; ++i) launch.held[i].reset();
  launch.nheld = 0;
  return status;
}

CompiledKernel* LaunchExecutor::go_wide(PreparedLaunch& launch) {
  for (uint32_t i = 0; i < launch.nargs; ++i) {
    const KernelArg& a = launch.args[i];
    if ((a.kind == ArgKind::kBuffer || a.kind == ArgKind::kConstBuffer) &&
        launch.wide_buffers[i] == nullptr)
      return nullptr;
  }
  CompiledKernel* kernel = launch.record->wide();
  if (kernel == nullptr) return nullptr;
  for (uint32_t i = 0; i < launch.nargs; ++i) {
    KernelArg& a = launch.args[i];
    if (a.kind == ArgKind::kBuffer || a.kind == ArgKind::kConstBuffer)
      a.buffer = launch.wide_buffers[i];
  }
  return kernel;
}

void LaunchExecutor::enqueue_and_wait(Queue& queue, CompiledKernel& kernel, PreparedLaunch& launch,
                                      absl::Status* status) {
  // On a driver that ran the kernel in its enqueue the launch has ended;
  // on another this waits for it (launches of one queue run in order).
  *status = queue.run_kernel(kernel, launch.geometry, launch.context,
                             std::span<const KernelArg>(launch.args.data(), launch.nargs));
}

}  // namespace kad::server::worker
