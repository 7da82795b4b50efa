#include "core/kernel_cache.h"

#include "absl/strings/str_cat.h"

namespace kad {
namespace {

bool repeats_for_the_same_key(absl::StatusCode code) {
  return code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kNotFound ||
         code == absl::StatusCode::kUnimplemented;
}

std::string parameters_key(absl::string_view module_digest, absl::string_view entry) {
  return absl::StrCat(module_digest, "\n", entry);
}

}  // namespace

absl::StatusOr<CompiledKernel*> KernelCache::get_or_compile(const SpecializationKey& key,
                                                            CompileFn compile) {
  std::string canonical = key.canonical();
  std::shared_ptr<InFlight> flight;
  {
    absl::MutexLock lock(&mu_);
    if (absl::StatusOr<CompiledKernel*> known = lookup(canonical); !known.ok() || *known != nullptr)
      return known;
    if (auto it = in_flight_.find(canonical); it != in_flight_.end()) {
      flight = it->second;
    } else {
      flight = std::make_shared<InFlight>();
      in_flight_.emplace(canonical, flight);
      flight.reset();  // this thread compiles
    }
  }
  if (flight) {  // another request compiles this key: wait for it alone
    flight->done.WaitForNotification();
    if (flight->result.ok()) record_hit();
    return flight->result;
  }

  absl::StatusOr<std::unique_ptr<CompiledKernel>> compiled = compile();  // no lock held

  absl::StatusOr<CompiledKernel*> result = nullptr;
  if (compiled.ok()) {
    CompiledKernel* raw = compiled->get();
    if (const std::vector<KernelParameter>* params = raw->parameters()) {
      absl::MutexLock parameters_lock(&parameters_mu_);
      parameters_.try_emplace(parameters_key(key.module_digest, key.entry), *params);
    }
    result = raw;
  } else {
    result = compiled.status();
  }
  absl::MutexLock lock(&mu_);
  if (compiled.ok()) {
    ++compilations_;
    entries_.emplace(canonical, *std::move(compiled));
  } else {
    ++failures_;
    if (repeats_for_the_same_key(result.status().code()))
      remember_failure(canonical, result.status());
  }
  auto it = in_flight_.find(canonical);
  flight = std::move(it->second);
  in_flight_.erase(it);
  flight->result = result;
  flight->done.Notify();
  return result;
}

absl::StatusOr<CompiledKernel*> KernelCache::find(const SpecializationKey& key) {
  const std::string canonical = key.canonical();
  absl::MutexLock lock(&mu_);
  return lookup(canonical);
}

absl::StatusOr<CompiledKernel*> KernelCache::lookup(const std::string& canonical) {
  if (auto it = entries_.find(canonical); it != entries_.end()) {
    record_hit();
    return it->second.get();
  }
  if (auto it = failed_.find(canonical); it != failed_.end()) {
    ++remembered_failures_;
    return it->second;
  }
  return nullptr;
}

void KernelCache::remember_failure(std::string canonical, const absl::Status& status) {
  if (failed_order_.size() >= kMaxRememberedFailures) {
    failed_.erase(failed_order_.front());
    failed_order_.pop_front();
  }
  failed_.emplace(canonical, status);
  failed_order_.push_back(std::move(canonical));
}

std::optional<std::vector<KernelParameter>> KernelCache::parameters(absl::string_view module_digest,
                                                                    absl::string_view entry) const {
  absl::MutexLock lock(&parameters_mu_);
  auto it = parameters_.find(parameters_key(module_digest, entry));
  if (it == parameters_.end()) return std::nullopt;
  return it->second;
}

KernelCache::Stats KernelCache::stats() const {
  absl::MutexLock lock(&mu_);
  Stats s;
  s.entries = entries_.size();
  s.compilations = compilations_;
  s.failures = failures_;
  s.remembered_failures = remembered_failures_;
  s.hits = hits_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace kad
