// Launch ends that the driver may call back in any order, on any of its
// threads, turned into the one figure the progress page carries: the newest
// launch up to which every launch has ended (DESIGN §8). A queue is in
// order, so the call for launch 6 means launch 5 has ended on the device,
// but not that 5's own call (which notes 5's failure, if it failed) has run:
// reporting 6 then would let the daemon's wait for 6 answer OK with 5's
// failure not yet known, and blame it on a later launch. So the figure only
// moves over launches whose own end has been marked.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

namespace kad::server::worker {

class EndFrontier {
 public:
  // Launches whose ends may be marked and not yet reported at once: the
  // daemon holds far fewer in flight per queue (its device depth).
  static constexpr uint64_t kRing = 4096;

  // Launch `seq` (numbered from 1) has ended, and what there was to note of
  // it is noted. Returns the newest launch up to which every launch's end
  // is now marked, when this call moved that figure; else 0. Safe from any
  // number of threads at once; allocates nothing.
  uint64_t mark_ended(uint64_t seq) {
    // Only grows: a slot's older launch never overwrites a newer one's mark.
    std::atomic<uint64_t>& slot = done_[seq % kRing];
    for (uint64_t had = slot.load(std::memory_order_relaxed);
         had < seq && !slot.compare_exchange_weak(had, seq, std::memory_order_release);) {
    }
    uint64_t from = frontier_.load(std::memory_order_acquire);
    for (;;) {
      uint64_t to = from;
      // A slot that holds a later launch than `to + 1` (kRing on) means
      // `to + 1` ended too: the slot is reused only after its launch ended.
      while (done_[(to + 1) % kRing].load(std::memory_order_acquire) >= to + 1) ++to;
      if (to == from) return 0;
      if (frontier_.compare_exchange_weak(from, to, std::memory_order_acq_rel)) return to;
      // Another call moved it meanwhile: go on from where it left it.
    }
  }

  // The newest launch up to which every end is marked.
  uint64_t frontier() const { return frontier_.load(std::memory_order_acquire); }

 private:
  std::array<std::atomic<uint64_t>, kRing> done_{};
  std::atomic<uint64_t> frontier_{0};
};

}  // namespace kad::server::worker
