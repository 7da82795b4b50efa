// Code objects the real toolchain lowers for gfx90a (clang -> AMDGCN ->
// ld.lld), built once per test process and shared by the tests that read
// their metadata and pack their arguments.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "core/kernel_signature.h"

namespace kad::hsa::testing {

// One module, three kernels:
// - `many_args`: every argument kind kad passes, and 256 bytes of static
//   local memory;
// - `wide`: amdgpu_flat_work_group_size(1, 1024), and OpenCL index queries
//   that read hidden arguments;
// - `fixed`: reqd_work_group_size(64, 1, 1).
extern const char kManyArgsSource[];

// The declared signature of `many_args`.
KernelSignature many_args_signature();

// The module lowered for gfx90a (compiled on first use).
const absl::StatusOr<std::string>& many_args_code_object();

}  // namespace kad::hsa::testing
