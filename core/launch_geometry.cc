#include "core/launch_geometry.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kad {

LaunchGeometry launch_geometry(const Partition& p, const LaunchChoice& choice) {
  LaunchGeometry g;
  if (choice.linear) {
    uint64_t groups = 1, items = 1;
    for (int d = 0; d < p.ndrange.rank(); ++d) {
      groups *= static_cast<uint64_t>(p.blocks[d]);
      items *= static_cast<uint64_t>(p.workgroup[d]);
    }
    g.groups[0] = groups;
    g.items[0] = items;
  } else {
    for (int d = 0; d < p.ndrange.rank(); ++d) {
      g.groups[static_cast<size_t>(d)] = static_cast<uint64_t>(p.blocks[d]);
      g.items[static_cast<size_t>(d)] = static_cast<uint64_t>(p.workgroup[d]);
    }
  }
  return g;
}

absl::Status validate_workgroup(absl::string_view kernel, const Dims& workgroup,
                                const DeviceLimits& device_limits) {
  int64_t items;
  if (!checked_product(workgroup, &items) ||
      static_cast<uint64_t>(items) > device_limits.max_workgroup_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "kernel `%s`: workgroup size %s has %s work-items, more than %d, the device's maximum",
        kernel, to_string(workgroup),
        checked_product(workgroup, &items) ? absl::StrCat(items) : "more than 2^63-1",
        device_limits.max_workgroup_size));
  }
  return absl::OkStatus();
}

absl::Status validate_geometry(absl::string_view kernel, const LaunchGeometry& g,
                               const KernelLimits& kernel_limits,
                               const DeviceLimits& device_limits) {
  // The total first: it is the limit a user meets first, and the only one a
  // linear launch (all items in dimension 0) can be told apart by.
  uint64_t total = 1;
  for (size_t d = 0; d < 3; ++d) {
    if (__builtin_mul_overflow(total, g.items[d], &total)) total = UINT64_MAX;
  }
  const uint64_t max_items =
      std::min(kernel_limits.max_workgroup_size, device_limits.max_workgroup_size);
  if (total > max_items) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "kernel `%s`: workgroup size (%d, %d, %d) has %d work-items, more than %d, the maximum "
        "for this kernel",
        kernel, g.items[0], g.items[1], g.items[2], total, max_items));
  }
  for (size_t d = 0; d < 3; ++d) {
    if (g.items[d] > device_limits.max_workgroup_dims[d]) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "kernel `%s`: workgroup size (%d, %d, %d) exceeds the maximum of %d work-items in "
          "dimension %d",
          kernel, g.items[0], g.items[1], g.items[2], device_limits.max_workgroup_dims[d], d));
    }
  }
  uint64_t groups = 1;
  for (size_t d = 0; d < 3; ++d) {
    if (__builtin_mul_overflow(groups, g.groups[d], &groups)) groups = UINT64_MAX;
  }
  if (groups > device_limits.max_total_groups) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "kernel `%s`: %d x %d x %d = %d groups exceed the device's maximum of %d groups in one "
        "launch",
        kernel, g.groups[0], g.groups[1], g.groups[2], groups, device_limits.max_total_groups));
  }
  for (size_t d = 0; d < 3; ++d) {
    if (g.groups[d] > device_limits.max_groups[d]) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "kernel `%s`: %d groups in dimension %d exceed the device's maximum of %d", kernel,
          g.groups[d], d, device_limits.max_groups[d]));
    }
    uint64_t global;
    if (__builtin_mul_overflow(g.groups[d], g.items[d], &global) ||
        global > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "kernel `%s`: %d groups of %d work-items in dimension %d exceed 2^63-1 work-items",
          kernel, g.groups[d], g.items[d], d));
    }
  }
  return absl::OkStatus();
}

}  // namespace kad
