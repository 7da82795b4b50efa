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

}  // namespace kad
