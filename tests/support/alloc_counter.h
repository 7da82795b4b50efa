// Counts heap allocations, for tests and benchmarks that assert or report
// allocations per launch (DESIGN §7). Link support/alloc_counter.cc into the
// binary: it replaces malloc and its family (operator new calls malloc), and
// attributes each allocation made on the calling thread to kad's own code or,
// inside a kad::DriverScope, to the driver. Allocations on other threads
// (driver worker threads) are counted in the total only.
#pragma once

#include <cstdint>

namespace kad::testing {

struct AllocCounts {
  uint64_t kad_allocs = 0;  // this thread, outside driver calls
  uint64_t kad_bytes = 0;
  uint64_t driver_allocs = 0;  // this thread, inside driver calls
  uint64_t driver_bytes = 0;
  uint64_t total_allocs = 0;  // every thread
  uint64_t total_bytes = 0;
  uint64_t all_driver_allocs = 0;  // every thread, inside driver calls
  uint64_t service_allocs =
      0;  // kad's service threads (kad::t_kad_service_thread), outside driver calls
};

// Counts from construction until counts() is called.
class AllocCounter {
 public:
  AllocCounter();
  AllocCounts counts() const;

 private:
  AllocCounts start_;
};

}  // namespace kad::testing
