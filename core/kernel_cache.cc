#include "core/kernel_cache.h"

#include "absl/strings/str_cat.h"

namespace kad {
namespace {

bool repeats_for_the_same_key(absl::StatusCode code) {
  return code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kNotFound ||
         code == absl::StatusCode::kUnimplemented;
}

std::string parameters_key(absl::string_view module_digest, absl::string_view entry,
                           absl::string_view build_options) {
  return absl::StrCat(module_digest, "\n", entry, "\n", build_options);
}

}  // namespace

absl::StatusOr<std::shared_ptr<CompiledKernel>> KernelCache::get_or_compile(
    const SpecializationKey& key, CompileFn compile) {
  std::string canonical = key.canonical();
  std::shared_ptr<InFlight> flight;
  {
    absl::MutexLock lock(&mu_);
    if (absl::StatusOr<std::shared_ptr<CompiledKernel>> known = lookup(canonical);
        !known.ok() || *known != nullptr)
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
    if (flight->result.ok()) record_hit(**flight->result);
    return flight->result;
  }

  const absl::Time compile_start = absl::Now();
  absl::StatusOr<std::unique_ptr<CompiledKernel>> compiled = compile();  // no lock held
  const absl::Duration compile_time = absl::Now() - compile_start;

  absl::StatusOr<std::shared_ptr<CompiledKernel>> result = nullptr;
  if (compiled.ok()) {
    std::shared_ptr<CompiledKernel> shared = *std::move(compiled);
    if (const std::vector<KernelParameter>* params = shared->parameters()) {
      absl::MutexLock parameters_lock(&parameters_mu_);
      std::string named = parameters_key(key.module_digest, key.entry, key.build_options);
      if (parameters_.try_emplace(named, *params).second) {
        parameters_order_.push_back(std::move(named));
        if (parameters_order_.size() > kMaxRememberedParameters) {
          parameters_.erase(parameters_order_.front());
          parameters_order_.pop_front();
        }
      }
    }
    result = std::move(shared);
  } else {
    result = compiled.status();
  }
  absl::MutexLock lock(&mu_);
  compile_time_ += compile_time;
  if (result.ok()) {
    ++compilations_;
    // Used now, under the lock that stats() reads the ticks with: the newest
    // entry is not the one to drop, and its tick is no hit.
    (*result)->touch(clock_.fetch_add(1, std::memory_order_relaxed) + 1);
    ++compile_ticks_;
    if (entries_.emplace(canonical, *result).second) bytes_ += (*result)->host_bytes();
    evict();
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

absl::StatusOr<std::shared_ptr<CompiledKernel>> KernelCache::find(const SpecializationKey& key) {
  const std::string canonical = key.canonical();
  absl::MutexLock lock(&mu_);
  return lookup(canonical);
}

absl::StatusOr<std::shared_ptr<CompiledKernel>> KernelCache::lookup(const std::string& canonical) {
  if (auto it = entries_.find(canonical); it != entries_.end()) {
    record_hit(*it->second);
    return it->second;
  }
  if (auto it = failed_.find(canonical); it != failed_.end()) {
    ++remembered_failures_;
    return it->second;
  }
  return nullptr;
}

void KernelCache::evict() {
  // A scan per compile past the bound: compiles are rare and slow next to it.
  while (entries_.size() > max_entries_ || (entries_.size() > 1 && bytes_ > max_bytes_)) {
    auto oldest = entries_.begin();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->second->last_used() < oldest->second->last_used()) oldest = it;
    }
    bytes_ -= oldest->second->host_bytes();
    entries_.erase(oldest);
    ++evictions_;
  }
}

void KernelCache::remember_failure(std::string canonical, const absl::Status& status) {
  if (failed_order_.size() >= kMaxRememberedFailures) {
    failed_.erase(failed_order_.front());
    failed_order_.pop_front();
  }
  failed_.emplace(canonical, status);
  failed_order_.push_back(std::move(canonical));
}

std::optional<std::vector<KernelParameter>> KernelCache::parameters(
    absl::string_view module_digest, absl::string_view entry,
    absl::string_view build_options) const {
  absl::MutexLock lock(&parameters_mu_);
  auto it = parameters_.find(parameters_key(module_digest, entry, build_options));
  if (it == parameters_.end()) return std::nullopt;
  return it->second;
}

KernelCache::Stats KernelCache::stats() const {
  absl::MutexLock lock(&mu_);
  Stats s;
  s.entries = entries_.size();
  s.max_entries = max_entries_;
  s.bytes = bytes_;
  s.max_bytes = max_bytes_;
  s.evictions = evictions_;
  s.compilations = compilations_;
  s.failures = failures_;
  s.remembered_failures = remembered_failures_;
  s.compile_seconds = absl::ToDoubleSeconds(compile_time_);
  s.hits = clock_.load(std::memory_order_relaxed) - compile_ticks_;
  return s;
}

}  // namespace kad
