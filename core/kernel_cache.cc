#include "core/kernel_cache.h"

namespace kad {

absl::StatusOr<CompiledKernel*> KernelCache::get_or_compile(const SpecializationKey& key,
                                                            CompileFn compile) {
  std::string canonical = key.canonical();
  absl::MutexLock lock(&mu_);
  if (auto it = entries_.find(canonical); it != entries_.end()) {
    record_hit();
    return it->second.get();
  }
  absl::StatusOr<std::unique_ptr<CompiledKernel>> compiled = compile();
  if (!compiled.ok()) {
    ++failures_;
    return compiled.status();
  }
  ++compilations_;
  CompiledKernel* raw = compiled->get();
  entries_.emplace(std::move(canonical), *std::move(compiled));
  return raw;
}

KernelCache::Stats KernelCache::stats() const {
  absl::MutexLock lock(&mu_);
  Stats s;
  s.entries = entries_.size();
  s.compilations = compilations_;
  s.failures = failures_;
  s.hits = hits_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace kad
