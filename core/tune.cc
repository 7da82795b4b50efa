#include "core/tune.h"

#include <algorithm>

namespace kad {

Dims threads_to_workgroup(uint64_t threads, const Dims& extents, const LaunchChoice& choice,
                          const DeviceLimits& limits) {
  Dims wgs = Dims::filled(extents.rank, 1);
  uint64_t total = 1;
  threads = std::max<uint64_t>(threads, 1);
  for (int d = 0; d < extents.rank; ++d) {
    const uint64_t limit = static_cast<uint64_t>(workgroup_dim_limit(limits, choice.linear, d));
    const uint64_t extent = static_cast<uint64_t>(std::max<int64_t>(extents[d], 0));
    const uint64_t x = std::max<uint64_t>(1, std::min({threads / total, extent, limit}));
    wgs[d] = static_cast<int64_t>(x);
    total *= x;
  }
  return wgs;
}

uint64_t spread_over_compute_units(const KernelLimits& kernel, uint64_t compute_units,
                                   uint64_t nitems, uint64_t max_items) {
  const uint64_t multiple = std::max<uint64_t>(1, kernel.preferred_multiple);
  const uint64_t cap = std::max<uint64_t>(1, std::min(kernel.max_workgroup_size, max_items));
  const uint64_t units = std::max<uint64_t>(1, compute_units);
  uint64_t threads = (nitems + units - 1) / units;
  threads = (threads + multiple - 1) / multiple * multiple;
  return std::clamp<uint64_t>(threads, std::min(multiple, cap), cap);
}

}  // namespace kad
