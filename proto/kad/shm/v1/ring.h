// The mechanics of kad's shared-memory rings, shared by the client and the
// daemon: publish and consume fixed-size records, spinning briefly before
// sleeping on a futex, and waking the other side only when it sleeps.
#pragma once

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

#include "kad/shm/v1/layout.h"

namespace kad::shm::v1 {

// Spins before sleeping: a futex wake-up costs ~13 us on a small VM, a spin
// round trip ~0.5 us (DESIGN §9). About 0.5 ms of pause instructions: long
// enough to cover a small kernel on PoCL (measured on a 2-core VM: 4000
// iterations gave 35.6 us per synchronous shm launch, 20000 gave 28.6 us,
// no spin 44.7 us).
inline constexpr int kSpinIterations = 20000;

inline void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_ns) {
  timespec ts{static_cast<time_t>(timeout_ns / 1000000000),
              static_cast<long>(timeout_ns % 1000000000)};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected,
          timeout_ns >= 0 ? &ts : nullptr, nullptr, 0);
}

inline void futex_wake(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, 1, nullptr, nullptr, 0);
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Waits until `word` differs from `seen`, or `timeout_ns` passes (-1: forever);
// `waiting` is raised while asleep so that the other side knows to wake us.
// With `spin` false (ChannelHeader::sleep_at_once), sleeps without spinning.
// Returns the new value (== seen on time-out).
inline uint32_t wait_for_change(std::atomic<uint32_t>* word, uint32_t seen,
                                std::atomic<uint32_t>* waiting, int64_t timeout_ns,
                                bool spin = true) {
  const int spins = spin ? kSpinIterations : 0;
  for (int i = 0; i < spins; ++i) {
    const uint32_t now = word->load(std::memory_order_acquire);
    if (now != seen) return now;
    // Yield now and then: with more spinners than cores, the side we wait
    // for may need this core. Measured on 2 cores, 16 client processes:
    // never yielding 2.1k launches/s (Jain 0.84), every 4096 spins 6.1k/s
    // (0.99), every 256 spins 9.3k/s but single-client latency 33 -> 56 us.
    if ((i & 4095) == 4095)
      sched_yield();
    else
      cpu_relax();
  }
  waiting->store(1, std::memory_order_seq_cst);
  uint32_t now = word->load(std::memory_order_seq_cst);
  if (now == seen) {
    futex_wait(word, seen, timeout_ns);
    now = word->load(std::memory_order_acquire);
  }
  waiting->store(0, std::memory_order_relaxed);
  return now;
}

// After publishing (storing `word`), wake the other side if it sleeps on it.
inline void notify(std::atomic<uint32_t>* word, std::atomic<uint32_t>* waiting) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (waiting->load(std::memory_order_seq_cst) != 0) futex_wake(word);
}

// Whether index `now` has reached `target` (indices wrap: by their distance).
inline bool reached(uint32_t now, uint32_t target) {
  return static_cast<int32_t>(now - target) >= 0;
}

// Sleeps until `word` reaches `target` (its producer_wake_at is `wake_at`),
// or `timeout_ns` passes; no spin. Whether it reached it.
inline bool wait_until_reached(std::atomic<uint32_t>* word, uint32_t target,
                               std::atomic<uint32_t>* waiting, std::atomic<uint32_t>* wake_at,
                               int64_t timeout_ns) {
  timespec start{};
  clock_gettime(CLOCK_MONOTONIC, &start);
  const int64_t start_ns = int64_t{start.tv_sec} * 1'000'000'000 + start.tv_nsec;
  wake_at->store(target, std::memory_order_relaxed);
  uint32_t now;
  for (;;) {
    // Raised at each sleep: the other side lowers it when it wakes us.
    waiting->store(1, std::memory_order_seq_cst);
    now = word->load(std::memory_order_seq_cst);
    if (reached(now, target)) break;
    timespec t{};
    clock_gettime(CLOCK_MONOTONIC, &t);
    const int64_t left = timeout_ns - (int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec - start_ns);
    if (left <= 0) break;
    // Returns at once where `word` moved on since it was read (the other
    // side stores it at every record, waking us only at the target).
    futex_wait(word, now, left);
  }
  waiting->store(0, std::memory_order_relaxed);
  wake_at->store(0, std::memory_order_relaxed);
  return reached(now, target);
}

// notify() for a producer that may wait for a target (producer_wake_at):
// after storing `head`, wakes it only once it is reached, and only once.
// The flag is lowered here, by whoever wakes it: a producer takes a
// wake-up's time (~13 us on a small VM) to run again, and the records
// consumed meanwhile must not each pay a futex call (2000 launches piped
// through a worker: 5 % of its time went to them).
inline void notify_producer(std::atomic<uint32_t>* head, std::atomic<uint32_t>* waiting,
                            std::atomic<uint32_t>* wake_at) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (waiting->load(std::memory_order_seq_cst) == 0) return;
  const uint32_t target = wake_at->load(std::memory_order_relaxed);
  if (target != 0 && !reached(head->load(std::memory_order_relaxed), target)) return;
  if (waiting->exchange(0, std::memory_order_seq_cst) != 0) futex_wake(head);
}

}  // namespace kad::shm::v1
