// Builds IR modules the way a client does: OpenCL C compiled by clang-15 for
// spir64 against the prelude (core/prelude/kad_prelude.cl, as embedded in
// kad), to LLVM bitcode or, through llvm-spirv-15, to SPIR-V.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/module.h"

namespace kad::testing {

// `kernel_source` against the prelude's linked form (-DKAD_LINKED_SPECIALIZATION).
absl::StatusOr<std::string> build_linked_ir(const std::string& kernel_source, ModuleFormat format,
                                            const std::vector<std::string>& clang_flags = {});

// `program` as it is, without the prelude: for modules that were not built
// against its linked form.
absl::StatusOr<std::string> build_plain_ir(const std::string& program, ModuleFormat format);

// The tools' folder (KAD_LLVM_BIN, else LLVM 15's) and llvm-spirv.
std::string llvm_tool(const std::string& name);

}  // namespace kad::testing
