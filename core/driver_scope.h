// Marks the calls a backend makes into a vendor driver, so that allocation
// counters (tests, benchmarks) can tell the driver's heap allocations from
// kad's own (DESIGN §7). Costs one thread-local increment.
#pragma once

namespace kad {

inline thread_local int t_driver_call_depth = 0;

class DriverScope {
 public:
  DriverScope() { ++t_driver_call_depth; }
  ~DriverScope() { --t_driver_call_depth; }
  DriverScope(const DriverScope&) = delete;
  DriverScope& operator=(const DriverScope&) = delete;
};

inline bool in_driver_call() { return t_driver_call_depth > 0; }

}  // namespace kad
