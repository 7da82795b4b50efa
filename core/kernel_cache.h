// The compiled-kernel cache (DESIGN §3.3, §5), in memory. Keyed by the
// canonical SpecializationKey: a launch that differs only in dynamic sizes or
// a tuned workgroup size maps to the same entry and never recompiles.
//
// Bounded (DESIGN §8): past `max_entries`, or past `max_bytes` of the
// entries' host_bytes() (program binaries a client can make tens of MiB
// each), it drops the entries least recently used by a launch. Entries are
// shared: a Kernel that holds one keeps it alive (its launches go on), and
// a session that asks for a dropped key compiles it again.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "core/backend.h"
#include "core/specialization.h"

namespace kad {

class KernelCache {
 public:
  struct Stats {
    uint64_t entries = 0;
    uint64_t max_entries = 0;
    uint64_t bytes = 0;  // the entries' host_bytes()
    uint64_t max_bytes = 0;
    uint64_t evictions = 0;            // entries dropped, least recently used first
    uint64_t hits = 0;                 // launches served by an entry
    uint64_t compilations = 0;         // successful compiles
    uint64_t failures = 0;             // compiles that failed
    uint64_t remembered_failures = 0;  // failures answered again without compiling
    double compile_seconds = 0;        // spent in compiles, failed ones included
  };

  // The most failed keys remembered; past it the oldest are forgotten (and
  // would be compiled again), so failing keys cannot grow the cache unbounded.
  static constexpr size_t kMaxRememberedFailures = 4096;

  static constexpr size_t kDefaultMaxEntries = 4096;
  explicit KernelCache(size_t max_entries = kDefaultMaxEntries,
                       uint64_t max_bytes = std::numeric_limits<uint64_t>::max())
      : max_entries_(max_entries == 0 ? 1 : max_entries), max_bytes_(max_bytes) {}

  using CompileFn = absl::FunctionRef<absl::StatusOr<std::unique_ptr<CompiledKernel>>()>;

  // Returns the entry for `key`, compiling it with `compile` on a miss.
  // A compile runs under no lock that another key needs (DESIGN §8): a slow
  // compile of one tenant's kernel never delays another's. Requests for a key
  // being compiled wait for that one compile and share its result.
  // A failure that the same key would repeat — the input's fault
  // (INVALID_ARGUMENT, NOT_FOUND, UNIMPLEMENTED), not the moment's — is
  // remembered and returned again without compiling: a module that does not
  // lower is not lowered again on every launch.
  absl::StatusOr<std::shared_ptr<CompiledKernel>> get_or_compile(const SpecializationKey& key,
                                                                 CompileFn compile);
  // The entry for `key` if it is compiled, else null (absent, or being
  // compiled); a remembered failure as its status. Never compiles.
  absl::StatusOr<std::shared_ptr<CompiledKernel>> find(const SpecializationKey& key);
  // A hit served without a map lookup (a Kernel's own table of entries):
  // counted, and the entry marked as used now. Allocates nothing.
  void record_hit(const CompiledKernel& used) {
    used.touch(clock_.fetch_add(1, std::memory_order_relaxed) + 1);
  }

  // The parameters of entry `entry` of the module with `module_digest`
  // built with `build_options` (whose macros may change them), as the first
  // compiled kernel of it that knew them reported them; none until such a
  // kernel was compiled. The most recent kMaxRememberedParameters are kept.
  std::optional<std::vector<KernelParameter>> parameters(absl::string_view module_digest,
                                                         absl::string_view entry,
                                                         absl::string_view build_options) const;
  static constexpr size_t kMaxRememberedParameters = 16384;

  Stats stats() const;

 private:
  // A compile in progress; its waiters hold it until they have read it.
  struct InFlight {
    absl::Notification done;
    absl::StatusOr<std::shared_ptr<CompiledKernel>> result = nullptr;
  };
  // The compiled entry, a remembered failure, or null (unknown or in flight).
  absl::StatusOr<std::shared_ptr<CompiledKernel>> lookup(const std::string& canonical)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops least recently used entries until at most `max_entries_` remain
  // holding at most `max_bytes_`; the newest entry stays, however large
  // (its compile's caller holds it anyway).
  void evict() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void remember_failure(std::string canonical, const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<InFlight>> in_flight_ ABSL_GUARDED_BY(mu_);
  const size_t max_entries_;
  const uint64_t max_bytes_;
  uint64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, std::shared_ptr<CompiledKernel>> entries_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, absl::Status> failed_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> failed_order_ ABSL_GUARDED_BY(mu_);  // oldest first
  // Its own lock: GetKernel reads it while another session compiles.
  mutable absl::Mutex parameters_mu_;
  absl::flat_hash_map<std::string, std::vector<KernelParameter>> parameters_
      ABSL_GUARDED_BY(parameters_mu_);
  std::deque<std::string> parameters_order_ ABSL_GUARDED_BY(parameters_mu_);  // oldest first
  uint64_t compilations_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t failures_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Duration compile_time_ ABSL_GUARDED_BY(mu_);
  uint64_t remembered_failures_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t evictions_ ABSL_GUARDED_BY(mu_) = 0;
  // Ticks once per use (CompiledKernel::touch): per hit, and per compile
  // (counted in `compile_ticks_`), so hits are the difference: one atomic
  // per warm launch.
  std::atomic<uint64_t> clock_{0};
  uint64_t compile_ticks_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace kad
