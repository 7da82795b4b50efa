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

// Set on threads that kad's daemon starts to serve requests (a shared-memory
// channel's thread), so that allocation counters can attribute their
// allocations to kad; the driver's own threads never set it.
inline thread_local bool t_kad_service_thread = false;

}  // namespace kad
