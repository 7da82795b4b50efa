// Stage 5 of the launch pipeline (DESIGN §3.5): the hardware grid of a launch
// and its validation against the compiled kernel's and the device's limits.
#pragma once

#include <array>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/device_limits.h"
#include "core/partition.h"
#include "core/select_launch.h"

namespace kad {

// Always three dimensions: an N-d grid pads with 1s, a linear launch is
// (product, 1, 1).
struct LaunchGeometry {
  std::array<uint64_t, 3> groups{1, 1, 1};
  std::array<uint64_t, 3> items{1, 1, 1};
};

LaunchGeometry launch_geometry(const Partition& partition, const LaunchChoice& choice);

// A workgroup size the launch or the kernel fixed, against the device's
// maximum work-items per workgroup, before it is padded to the hardware's
// three dimensions or flattened for a linear launch: the message shows the
// size the client gave.
absl::Status validate_workgroup(absl::string_view kernel, const Dims& workgroup,
                                const DeviceLimits& device_limits);

// Items per dimension and in total against the kernel's limits, groups per
// dimension against the device's, and the global size per dimension against
// int64. Messages name the kernel, the value and the limit.
absl::Status validate_geometry(absl::string_view kernel, const LaunchGeometry& geometry,
                               const KernelLimits& kernel_limits,
                               const DeviceLimits& device_limits);

}  // namespace kad
