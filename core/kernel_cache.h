// The compiled-kernel cache (DESIGN §3.3, §5), in memory. Keyed by the
// canonical SpecializationKey: a launch that differs only in dynamic sizes or
// a tuned workgroup size maps to the same entry and never recompiles.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/backend.h"
#include "core/specialization.h"

namespace kad {

class KernelCache {
 public:
  struct Stats {
    uint64_t entries = 0;
    uint64_t hits = 0;          // launches served by an entry
    uint64_t compilations = 0;  // successful compiles
    uint64_t failures = 0;      // compiles that failed (not cached: a fixed source may follow)
  };

  using CompileFn = absl::FunctionRef<absl::StatusOr<std::unique_ptr<CompiledKernel>>()>;

  // Returns the entry for `key`, compiling it with `compile` on a miss.
  // Compiles run under the cache's lock, so one key is never compiled twice.
  absl::StatusOr<CompiledKernel*> get_or_compile(const SpecializationKey& key, CompileFn compile);
  // A hit served without a map lookup (a Kernel's own table of entries).
  void record_hit() { hits_.fetch_add(1, std::memory_order_relaxed); }

  Stats stats() const;

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<CompiledKernel>> entries_ ABSL_GUARDED_BY(mu_);
  uint64_t compilations_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t failures_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<uint64_t> hits_{0};
};

}  // namespace kad
