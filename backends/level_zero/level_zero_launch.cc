#include "backends/level_zero/level_zero_launch.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_format.h"

namespace kad::level_zero {
namespace {

constexpr uint64_t kMax32 = std::numeric_limits<uint32_t>::max();

}  // namespace

ArgumentValue context_argument(const LaunchContext& context) {
  return {sizeof(LaunchContext), &context};
}

ArgumentValue user_argument(const KernelArg& arg, void* const* device_address) {
  switch (arg.kind) {
    case ArgKind::kBuffer:
    case ArgKind::kConstBuffer:
      return {sizeof(void*), device_address};
    case ArgKind::kScalar:
      return {scalar_type_size(arg.scalar), &arg.bits};
    case ArgKind::kLocal:
      return {static_cast<size_t>(arg.local_bytes), nullptr};
  }
  return {};
}

absl::Status launch_grid(absl::string_view kernel, const LaunchGeometry& geometry,
                         LaunchGrid* grid) {
  uint32_t* counts[3] = {&grid->groups.groupCountX, &grid->groups.groupCountY,
                         &grid->groups.groupCountZ};
  for (int d = 0; d < 3; ++d) {
    if (geometry.items[d] > kMax32 || geometry.groups[d] > kMax32) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "kernel `%s`: dimension %d has %d items per group and %d groups; Level Zero takes at "
          "most %d of each",
          kernel, d + 1, geometry.items[d], geometry.groups[d], kMax32));
    }
    grid->group_size[d] = static_cast<uint32_t>(geometry.items[d]);
    *counts[d] = static_cast<uint32_t>(geometry.groups[d]);
  }
  return absl::OkStatus();
}

uint32_t suggestion_extent(uint64_t nitems, uint64_t multiple) {
  multiple = std::clamp<uint64_t>(multiple, 1, kMax32);
  const uint64_t largest = kMax32 / multiple * multiple;
  const uint64_t n = std::max<uint64_t>(nitems, 1);
  if (n > largest) return static_cast<uint32_t>(largest);
  return static_cast<uint32_t>((n + multiple - 1) / multiple * multiple);
}

uint64_t tuned_group_size(uint64_t suggested, uint64_t nitems, uint64_t multiple, uint64_t cap) {
  cap = std::max<uint64_t>(cap, 1);
  if (suggested == 0) suggested = suggestion_extent(nitems, multiple);
  return std::clamp<uint64_t>(suggested, 1, cap);
}

KernelLimits kernel_limits(const ze_kernel_properties_t& properties, const DeviceLimits& device) {
  KernelLimits limits;
  const uint64_t required = uint64_t{properties.requiredGroupSizeX} *
                            properties.requiredGroupSizeY * properties.requiredGroupSizeZ;
  if (required != 0) {
    limits.max_workgroup_size = required;
  } else if (properties.maxNumSubgroups != 0 && properties.maxSubgroupSize != 0) {
    limits.max_workgroup_size =
        std::min<uint64_t>(device.max_workgroup_size,
                           uint64_t{properties.maxNumSubgroups} * properties.maxSubgroupSize);
  } else {
    limits.max_workgroup_size = device.max_workgroup_size;
  }
  const uint32_t simd = properties.requiredSubgroupSize != 0 ? properties.requiredSubgroupSize
                                                             : properties.maxSubgroupSize;
  limits.preferred_multiple = std::max<uint64_t>(simd, 1);
  limits.local_memory_bytes = properties.localMemSize;
  return limits;
}

}  // namespace kad::level_zero
