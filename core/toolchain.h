// The toolchain that lowers kernels for the GPU backends (DESIGN §5):
// OpenCL C with the prelude to PTX (clang NVPTX + libclc), to SPIR-V (clang
// spir64 + llvm-spirv), and to an AMDGCN code object (clang + libclc + lld).
// Every tool runs in a child process with time, memory and output limits, so
// a compiler crash, hang or runaway output never reaches the daemon: it comes
// back as a clear error.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kad {

enum class CodeTarget { kPtx, kSpirv, kAmdgcn };
absl::string_view code_target_name(CodeTarget target);

struct ToolchainLimits {
  int64_t seconds = 120;                       // wall clock, per tool
  uint64_t memory_bytes = uint64_t{8} << 30;   // address space, per tool
  uint64_t output_bytes = uint64_t{256} << 20; // largest file a tool may write
};

// One tool run: how it ended and what it printed (stdout and stderr, capped).
struct ToolRun {
  int exit_code = -1;
  int signal = 0;
  std::string output;
};

// Runs `argv` in a child process under `limits`. DEADLINE_EXCEEDED when it
// ran too long, RESOURCE_EXHAUSTED when it wrote too much; a crash or a
// non-zero exit is returned as a ToolRun for the caller to report.
absl::StatusOr<ToolRun> run_limited(const std::vector<std::string>& argv,
                                    const ToolchainLimits& limits);

class Toolchain {
 public:
  // Finds clang, llvm-link, llc, llvm-spirv, ld.lld and libclc (LLVM 15, as
  // Debian 12 packages them; KAD_LLVM_BIN overrides the tools' folder).
  static absl::StatusOr<Toolchain> find();

  // "clang 15.0.6" and the like: part of every specialisation key.
  const std::string& version() const { return version_; }

  // Lowers a specialised OpenCL C program (specialised_source()). `cpu` is the
  // device's architecture: sm_80 for PTX, gfx90a for AMDGCN; ignored for SPIR-V.
  // Returns PTX text, a SPIR-V module or an AMDGCN code object (ELF).
  absl::StatusOr<std::string> lower(CodeTarget target, absl::string_view source,
                                    absl::string_view cpu, absl::string_view options,
                                    const ToolchainLimits& limits = {}) const;

 private:
  std::string bin_, clang_, llvm_link_, llc_, llvm_spirv_, lld_, libclc_, version_;
};

}  // namespace kad
