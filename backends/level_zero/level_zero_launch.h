// The translations between kad's launch records and what the Level Zero
// driver takes: parameter values, the grid, the tuned group size and a
// compiled kernel's limits. Pure functions, so that they are tested without
// a device; none allocates except to build an error.
#pragma once

#include <level_zero/ze_api.h>

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/device_limits.h"
#include "core/launch_context.h"
#include "core/launch_geometry.h"
#include "core/launch_request.h"

namespace kad::level_zero {

// One zeKernelSetArgumentValue(kernel, index, size, value) call.
struct ArgumentValue {
  size_t size = 0;
  const void* value = nullptr;  // null: local memory of `size` bytes
};

// Parameter 0: the LaunchContext by value (the prelude's `kad_context`).
ArgumentValue context_argument(const LaunchContext& context);

// The parameter for one user argument: a buffer as its device address (read
// from `*device_address`, the buffer's own field, so nothing is copied), a
// scalar as its bytes (KernelArg keeps them little end first), local memory
// as its size with no value.
ArgumentValue user_argument(const KernelArg& arg, void* const* device_address);

// A launch's grid as the driver takes it: items per group (zeKernelSetGroupSize)
// and groups (zeCommandListAppendLaunchKernel), 32 bits per dimension.
struct LaunchGrid {
  uint32_t group_size[3] = {1, 1, 1};
  ze_group_count_t groups{1, 1, 1};
};

// InvalidArgument, naming the kernel, the dimension and the value, when a
// size does not fit 32 bits (core validates against the device's limits,
// which Level Zero reports in 32 bits, so this only guards that contract).
absl::Status launch_grid(absl::string_view kernel, const LaunchGeometry& geometry,
                         LaunchGrid* grid);

// The global size to ask zeKernelSuggestGroupSize about for `nitems` items.
// The driver suggests a size that divides the global size exactly, which for
// an awkward count (a prime) would be 1; kad pads and bounds-checks instead,
// so ask about `nitems` rounded up to `multiple` (the kernel's SIMD width),
// within 32 bits.
uint32_t suggestion_extent(uint64_t nitems, uint64_t multiple);

// Items per group for a tuned launch: the driver's suggestion (0 when it gave
// none: then `nitems` rounded up to `multiple`), within [1, cap].
uint64_t tuned_group_size(uint64_t suggested, uint64_t nitems, uint64_t multiple, uint64_t cap);

// A compiled kernel's limits from zeKernelGetProperties and the device's:
// a required group size is the only size; otherwise the kernel's subgroups
// (maxNumSubgroups x maxSubgroupSize, which the compiler lowers for kernels
// using many registers) bound the device's maximum.
KernelLimits kernel_limits(const ze_kernel_properties_t& properties, const DeviceLimits& device);

}  // namespace kad::level_zero
