// Pure rules of the CUDA backend, kept apart from driver calls so that they
// are tested on machines without a GPU.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kad::cuda {

// Threads per block for a launch of `nitems` (DESIGN §3.4), from what
// cuOccupancyMaxPotentialBlockSize suggested (`block`, and `min_grid`: the
// blocks that fill the device) under a limit of `max_items`. With
// `prefer_blocks` (KernelAbstractions' option of that name), trade threads
// for blocks until at least `min_grid` blocks run:
// blocks = max(ceil(nitems / threads), min_grid), threads = ceil(nitems / blocks).
uint64_t occupancy_threads(uint64_t nitems, uint64_t max_items, int block, int min_grid,
                           bool prefer_blocks);

// The PTX target kad lowers to for a device of compute capability
// major.minor: the newest that LLVM 15's NVPTX backend knows (sm_80) and the
// device can run; the driver JIT-compiles it for the device itself.
absl::StatusOr<std::string> ptx_target_for(int major, int minor);

// How many parameters the `.entry` of `entry` in `ptx` declares (KAD_CONTEXT
// included): PTX names no kinds (a pointer and a ulong are both .u64), but
// the count shows a signature that passes fewer or more arguments.
absl::StatusOr<size_t> ptx_parameter_count(absl::string_view ptx, absl::string_view entry);

// Adds `.maxntid x, y, z` to the `.entry` of `entry` in `ptx`: the kernel's
// maximum thread count when its workgroup size is static, so that ptxas and
// the JIT budget registers for exactly that block size.
absl::StatusOr<std::string> with_max_threads(absl::string_view ptx, absl::string_view entry,
                                             const std::array<uint64_t, 3>& threads);

// The byte alignment of each local-memory argument in the dynamic shared
// memory of a launch.
inline constexpr uint64_t kLocalAlignment = 16;

// CUDA kernels take no pointers to shared memory sized at launch, which
// OpenCL's `local T*` parameters are: rewrites the `.entry` of `entry` so
// that each of those parameters (0-based PTX parameter indices) carries a
// byte offset into the launch's dynamic shared memory, and the kernel adds
// the window's base address when it loads the parameter. The queue passes
// the offsets and the total as the launch's dynamic shared memory.
absl::StatusOr<std::string> with_dynamic_local(absl::string_view ptx, absl::string_view entry,
                                               std::span<const int> local_params);

}  // namespace kad::cuda
