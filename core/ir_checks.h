// Checks on LLVM IR that a client submitted (DESIGN §8): LLVM inside a
// driver (PoCL reads a kernel's OpenCL metadata with bare assertions) is not
// hardened against malformed IR, so kad reads the module's text form — made
// by LLVM's own tools in a limited child process, which also run the IR
// verifier (Toolchain::verify_ir) — and refuses what a driver would trip on.
#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace kad {

// Checks every kernel (`define ... spir_kernel`) of a module's textual IR:
// it carries the OpenCL argument metadata drivers read
// (kernel_arg_addr_space, kernel_arg_access_qual, kernel_arg_type,
// kernel_arg_type_qual; kernel_arg_base_type and kernel_arg_name when
// present), each with one operand per parameter, address spaces as `i32`
// constants and the rest as strings; and the module has no SPIR 1.2
// `!opencl.kernels` list, whose older reader asserts the same things.
// INVALID_ARGUMENT naming `what` (the module's format), the kernel and the
// metadata at fault.
absl::Status check_kernel_metadata(absl::string_view what, absl::string_view llvm_ir);

// Refuses inline assembly (`call ... asm "..."`, `module asm`): on a CPU
// device it is native code of the client's choosing — system calls, say —
// outside everything the language lets a kernel do. INVALID_ARGUMENT naming
// `what` and the line.
absl::Status check_no_inline_assembly(absl::string_view what, absl::string_view llvm_ir);

}  // namespace kad
