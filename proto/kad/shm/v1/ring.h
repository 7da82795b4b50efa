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

}  // namespace kad::shm::v1
