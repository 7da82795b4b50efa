// Stage 2 of the launch pipeline (DESIGN §3.2): how a launch maps onto the
// device. The choice is compiled into the kernel, so it never depends on the
// workgroup size that tuning will pick.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/device_limits.h"
#include "core/dims.h"

namespace kad {

struct LaunchChoice {
  uint8_t rank = 0;         // the ndrange's rank
  bool linear = false;      // 1-d hardware launch; the kernel recovers Cartesian indices
  uint8_t index_bits = 32;  // 32 or 64-bit index arithmetic in the kernel
  bool operator==(const LaunchChoice&) const = default;
};

// "N-d grid, 32-bit indices, rank 2" and the like.
std::string to_string(const LaunchChoice& choice);

// Chooses an N-d grid when rank <= 3 and every dimension fits the device's
// per-dimension limits, else a linear launch; 32-bit indices when the padded
// iteration space has at most 2^31-1 work-items (or is empty), else 64-bit.
// `workgroup` is null when the workgroup size is still to be tuned: then the
// padded space is bounded conservatively (see padded_bound).
absl::StatusOr<LaunchChoice> select_launch(absl::string_view kernel, const Dims& extents,
                                           const Dims* workgroup, const DeviceLimits& limits);

// The upper bound select_launch uses for the padded iteration space when the
// workgroup size is still to be tuned, per dimension: items = max(1, min(extent,
// capacity, limit)), padded = extent + items - 1 (0 for an empty extent),
// capacity /= items. Saturates at INT64_MAX and then sets `*overflowed` (when
// given): select_launch refuses such a launch. `linear` selects the
// per-dimension limits tuning will use (workgroup_dim_limit).
Dims padded_bound(const Dims& extents, const DeviceLimits& limits, bool linear,
                  bool* overflowed = nullptr);

// The most items a workgroup may have in dimension d: the device's limit for
// that dimension in an N-d grid; in a linear launch every item lies in
// hardware dimension 0, so its limit applies to each dimension. Tuning and
// padded_bound share this rule, so the bound holds for any tuned size.
int64_t workgroup_dim_limit(const DeviceLimits& limits, bool linear, int d);

}  // namespace kad
