// What the pipeline needs to know about a device. Queried once per device when
// the backend starts, never per launch.
#pragma once

#include <array>
#include <cstdint>
#include <limits>

namespace kad {

inline constexpr uint64_t kUnlimited = std::numeric_limits<int64_t>::max();

struct DeviceLimits {
  uint64_t max_workgroup_size = 1;                      // work-items in one workgroup
  std::array<uint64_t, 3> max_workgroup_dims{1, 1, 1};  // work-items per dimension
  std::array<uint64_t, 3> max_groups{kUnlimited, kUnlimited, kUnlimited};  // groups per dimension
  // Groups in one launch, all dimensions together. Some drivers count groups
  // in 32 bits (PoCL's pthread and basic devices), far below the product of
  // max_groups: a launch past it must be refused before it reaches them.
  uint64_t max_total_groups = kUnlimited;
  uint64_t compute_units = 1;
  uint64_t subgroup_width = 1;
  uint64_t global_memory_bytes = 0;
  uint64_t max_allocation_bytes = 0;
  uint64_t local_memory_bytes = 0;
  uint64_t max_parameter_bytes = 0;  // total size of a kernel's arguments
};

// Limits of one compiled kernel, which may be tighter than the device's
// (registers, local memory, a required workgroup size).
struct KernelLimits {
  uint64_t max_workgroup_size = 1;
  uint64_t preferred_multiple = 1;  // warp / wavefront / SIMD width hint
  uint64_t local_memory_bytes = 0;  // statically used by the kernel
};

}  // namespace kad
