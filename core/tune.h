// Stage 4 of the launch pipeline (DESIGN §3.4): turn the thread count a
// backend suggests for a kernel into a workgroup shape.
#pragma once

#include <cstdint>

#include "core/device_limits.h"
#include "core/dims.h"
#include "core/select_launch.h"

namespace kad {

// Fills dimension 0 first: x_d = max(1, min(threads / product so far,
// extent_d, limit_d)), limit_d = workgroup_dim_limit(limits, choice.linear, d).
Dims threads_to_workgroup(uint64_t threads, const Dims& extents, const LaunchChoice& choice,
                          const DeviceLimits& limits);

// A CPU device's thread count for `nitems` work-items (at most `max_items`
// per group): enough items per group that every compute unit gets a group,
// rounded up to the kernel's preferred multiple. OpenCL devices use it, and
// so does a device served by a worker process, which must answer without
// asking the worker (the warm path). Allocates nothing.
uint64_t spread_over_compute_units(const KernelLimits& kernel, uint64_t compute_units,
                                   uint64_t nitems, uint64_t max_items);

}  // namespace kad
