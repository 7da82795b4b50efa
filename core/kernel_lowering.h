// Lowers a compile request's module to the code one kind of device consumes
// (DESIGN §5's table), through the on-disk CodeCache: the GPU backends call
// this instead of running a compiler themselves.
//
// The on-disk key is the specialisation key with the device replaced by the
// code target (`ptx sm_80`) and the versions by the toolchain's: lowered code
// depends on the target architecture, never on which device of it or on the
// driver that later loads it. So code lowered on a build machine serves a GPU
// machine that has no compiler of ours: there the toolchain is missing, the
// version kad was built with names the entries, and every lookup must hit.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "core/backend.h"
#include "core/code_cache.h"
#include "core/toolchain.h"

namespace kad {

// A code target and its architecture ("ptx:sm_80" names {kPtx, "sm_80"}).
struct LoweringTarget {
  CodeTarget target = CodeTarget::kPtx;
  std::string cpu;
};

// Parses "ptx:sm_80,spirv,amdgcn:gfx90a" (the KAD_PRELOWER variable).
absl::StatusOr<std::vector<LoweringTarget>> parse_lowering_targets(absl::string_view list);

class KernelLowering {
 public:
  // `toolchain` may be an error (not installed): then only cached code and
  // native formats (PTX, cubin, code objects) can be served. `prelower`:
  // targets that every compile also lowers for, see prelower().
  KernelLowering(absl::StatusOr<Toolchain> toolchain, CodeCache* cache,
                 std::vector<LoweringTarget> prelower = {});

  // The process-wide instance: Toolchain::find(), CodeCache::from_environment()
  // (or the folder given to configure_shared_cache) and the targets of
  // KAD_PRELOWER, made on first use.
  static KernelLowering& shared();
  // Where shared() keeps its cache (kad's --cache-dir); an empty folder turns
  // it off. Only before the first shared(): false when too late.
  static bool configure_shared_cache(std::string folder, uint64_t max_bytes);
  // The toolchain's version as the daemon found it, so that shared() need not
  // run `clang --version` (Toolchain::find). Only before the first shared().
  static bool configure_known_toolchain_version(std::string version);

  // Names lowered code in keys: the toolchain found, else the one kad was built with.
  const std::string& version() const { return version_; }
  // OK, or why no toolchain was found.
  absl::Status toolchain_status() const {
    return toolchain_.ok() ? absl::OkStatus() : toolchain_.status();
  }
  CodeCache& cache() { return *cache_; }
  // The files and folders the toolchain's tools read (none without one): what
  // a sandbox around a process that lowers code must let it read.
  std::vector<std::string> toolchain_files() const {
    return toolchain_.ok() ? toolchain_->readable() : std::vector<std::string>{};
  }

  // The time, memory and output every tool run may use (kad's
  // --compile-timeout, --compile-memory-mib); ToolchainLimits' defaults until set.
  void set_limits(const ToolchainLimits& limits) ABSL_LOCKS_EXCLUDED(limits_mu_);
  ToolchainLimits limits() const ABSL_LOCKS_EXCLUDED(limits_mu_);

  // The key of the lowered code on disk (see above).
  std::string code_key(const CompileRequest& request, CodeTarget target,
                       absl::string_view cpu) const;

  // PTX text, a SPIR-V module, an AMDGCN code object or SPIR bitcode for
  // `request`. Native formats pass through; everything else is looked up on
  // disk, else lowered and stored.
  absl::StatusOr<std::string> lower(const CompileRequest& request, CodeTarget target,
                                    absl::string_view cpu);

  // Warms the on-disk cache for other machines: lowers `request` for every
  // prelower target, as a backend that adds no compiler options of its own
  // would ask for it (the CUDA backend; the HSA backend adds one for static
  // workgroup sizes, so those kernels are not warmed for it). A build machine running the test
  // suite or the benchmarks with KAD_PRELOWER=ptx:sm_80 fills a cache that a
  // GPU node without a toolchain then serves from. Returns how many targets
  // were lowered or already cached; failures only count as not done.
  int prelower(const CompileRequest& request);

  // Verifies a module submitted as IR (Toolchain::verify_ir) before any
  // in-process compiler sees it; a module already verified (by digest) is not
  // verified again. Other formats pass. FAILED_PRECONDITION without a
  // toolchain: kad does not hand unverified IR to a driver.
  absl::Status verify(const Module& module);
  bool prelowering() const { return !prelower_.empty(); }

 private:
  absl::StatusOr<std::string> run_toolchain(const CompileRequest& request, CodeTarget target,
                                            absl::string_view cpu) const;

  absl::StatusOr<Toolchain> toolchain_;
  CodeCache* cache_;
  std::vector<LoweringTarget> prelower_;
  std::string version_;
  mutable absl::Mutex limits_mu_;
  ToolchainLimits limits_ ABSL_GUARDED_BY(limits_mu_);
  absl::Mutex verified_mu_;
  absl::flat_hash_set<std::string> verified_ ABSL_GUARDED_BY(verified_mu_);  // module digests
};

// The toolchain version kad was configured with (clang's `--version` line).
absl::string_view built_toolchain_version();

}  // namespace kad
