// The toolchain that lowers kernels for the GPU backends (DESIGN §5):
// OpenCL C with the prelude to PTX (clang NVPTX + libclc), to SPIR-V (clang
// spir64 + llvm-spirv), and to an AMDGCN code object (clang + libclc + lld);
// modules submitted as SPIR-V or spir64 bitcode, linked with their
// specialisation, to SPIR bitcode and SPIR-V.
// Every tool runs in a child process with time, memory and output limits, so
// a compiler crash, hang or runaway output never reaches the daemon: it comes
// back as a clear error.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/module.h"
#include "core/tool_sandbox.h"

namespace kad {

// What a device consumes: PTX text (CUDA), a SPIR-V module (Level Zero), an
// AMDGCN code object (HSA), or SPIR 1.2 bitcode (OpenCL's cl_khr_spir, for
// modules submitted as IR).
enum class CodeTarget { kPtx, kSpirv, kAmdgcn, kSpir };
absl::string_view code_target_name(CodeTarget target);

struct ToolchainLimits {
  int64_t seconds = 120;                        // wall clock, per tool
  uint64_t memory_bytes = uint64_t{8} << 30;    // address space, per tool
  uint64_t output_bytes = uint64_t{256} << 20;  // largest file a tool may write
};

// One tool run: how it ended and what it printed (stdout and stderr, capped).
struct ToolRun {
  int exit_code = -1;
  int signal = 0;
  std::string output;
};

// Runs `argv` in a child process under `limits`, confined to `sandbox`
// when given (and the kernel supports it). DEADLINE_EXCEEDED when it ran too
// long, RESOURCE_EXHAUSTED when it wrote too much; a crash or a non-zero exit
// is returned as a ToolRun for the caller to report.
absl::StatusOr<ToolRun> run_limited(const std::vector<std::string>& argv,
                                    const ToolchainLimits& limits,
                                    const ToolSandbox* sandbox = nullptr);

// The revision of kad's lowering steps (which tools, which options): part of
// every on-disk key next to the tools' version, so code lowered by an older
// kad is never served. Bump it whenever lower() or lower_ir() change output.
inline constexpr int kLoweringRevision = 4;

class Toolchain {
 public:
  // Finds clang, llvm-link, llc, llvm-nm, opt, llvm-spirv, ld.lld and libclc (LLVM 15, as
  // Debian 12 packages them; KAD_LLVM_BIN overrides the tools' folder), and
  // asks clang its version unless `known_version` tells it (a worker is told
  // its daemon's: the same tools on the same machine, 40 ms sooner).
  static absl::StatusOr<Toolchain> find(absl::string_view known_version = {});

  // "clang 15.0.6" and the like: part of every specialisation key.
  const std::string& version() const { return version_; }
  // The toolchain's own files: all that its tools may read (sandbox_for).
  const std::vector<std::string>& readable() const { return readable_; }

  // Lowers a specialised OpenCL C program (specialised_source()). `cpu` is the
  // device's architecture: sm_80 for PTX, gfx90a for AMDGCN; ignored for SPIR-V.
  // Returns PTX text, a SPIR-V module or an AMDGCN code object (ELF).
  absl::StatusOr<std::string> lower(CodeTarget target, absl::string_view source,
                                    absl::string_view cpu, absl::string_view options,
                                    const ToolchainLimits& limits = {}) const;

  // Lowers a module submitted as IR (SPIR-V or spir64 LLVM bitcode, built
  // against the prelude in its linked form) for one specialisation:
  // `specialization` (specialization_defines()) and the prelude are compiled
  // into the definitions of the prelude's __kad_spec_* functions, which are
  // linked with the module (SPIR-V first goes back to bitcode, llvm-spirv -r).
  // kSpir returns the linked bitcode optimised by opt -O2 (SPIR 1.2, for
  // cl_khr_spir: the specialisation is folded in it); kSpirv the linked
  // bitcode translated by llvm-spirv, unoptimised (llvm-spirv 15 cannot take
  // `freeze`), for the consuming driver to optimise. kPtx and kAmdgcn are UNIMPLEMENTED (SPIR's
  // address spaces would have to be rewritten). A module not built against the linked prelude, not
  // readable or not spir64 is INVALID_ARGUMENT. `options` are the consuming
  // driver's, and `cpu` is unused for SPIR targets.
  // Checks a module submitted as IR before any in-process compiler (a
  // driver's LLVM) sees it: SPIR-V goes back to bitcode (llvm-spirv -r); the
  // bitcode is parsed and run through LLVM's verifier (opt, which prints the
  // module's text), and its kernels' OpenCL metadata is checked
  // (check_kernel_metadata). Each tool in a child process under `limits`.
  // INVALID_ARGUMENT with the tool's or the check's message.
  absl::Status verify_ir(ModuleFormat format, absl::string_view module,
                         const ToolchainLimits& limits = {}) const;

  absl::StatusOr<std::string> lower_ir(CodeTarget target, ModuleFormat format,
                                       absl::string_view module, absl::string_view specialization,
                                       absl::string_view cpu, absl::string_view options,
                                       const ToolchainLimits& limits = {}) const;

 private:
  // What a tool run in `workdir` may touch: the toolchain's files, and `workdir`.
  ToolSandbox sandbox_for(const std::string& workdir) const;

  std::vector<std::string> readable_;  // the toolchain's own files
  std::string bin_, clang_, llvm_link_, llc_, llvm_spirv_, llvm_nm_, opt_, lld_, libclc_, version_;
};

}  // namespace kad
