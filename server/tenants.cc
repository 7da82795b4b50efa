#include "server/tenants.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kad::server {

namespace {

// Each quota's config key and what it counts, as a message says it after a
// number; indexed by Quota.
struct QuotaNames {
  const char* key;
  const char* noun;
};
constexpr QuotaNames kQuotaNames[kQuotaCount] = {
    {"sessions", "sessions"},
    {"device_memory_bytes", "bytes of device memory on "},  // + the device
    {"queues", "queues"},
    {"streams", "Submit streams"},
    {"channels", "shared-memory channels"},
    {"module_bytes", "bytes of modules"},
    {"kernels", "kernels"},
    {"launches_in_flight", "launches in flight"},
};

std::string quota_noun(Quota quota, const std::string& device) {
  return absl::StrCat(kQuotaNames[static_cast<int>(quota)].noun, device);
}

}  // namespace

const char* quota_key(Quota quota) { return kQuotaNames[static_cast<int>(quota)].key; }

absl::Status Budget::exhausted(uint64_t asked) const {
  refusals_.fetch_add(1, std::memory_order_relaxed);
  return absl::ResourceExhaustedError(
      absl::StrFormat("%s is at its quota of %s: %d in use, %d more asked, limit %d (%s)", owner_,
                      what_, used(), asked, limit_, setting_));
}

absl::Status Budget::take(uint64_t amount) {
  uint64_t used = used_.load(std::memory_order_relaxed);
  do {
    if (amount > limit_ || used > limit_ - amount) return exhausted(amount);
  } while (!used_.compare_exchange_weak(used, used + amount, std::memory_order_relaxed));
  return absl::OkStatus();
}

absl::StatusOr<Charge> Charge::take(std::shared_ptr<Budget> budget, uint64_t amount) {
  if (absl::Status s = budget->take(amount); !s.ok()) return s;
  return Charge(std::move(budget), amount);
}

absl::Status Charge::grow(uint64_t amount) {
  // A charge given back (its session closed while a request of it still
  // ran) holds no budget: the request is refused, not the daemon crashed.
  if (budget_ == nullptr)
    return absl::FailedPreconditionError("the session is closing: request refused");
  if (absl::Status s = budget_->take(amount); !s.ok()) return s;
  amount_ += amount;
  return absl::OkStatus();
}

Tenant::Tenant(TenantSpec spec, const std::vector<std::string>& device_ids, int nice,
               int higher_classes)
    : spec_(std::move(spec)), nice_(nice), higher_classes_(higher_classes) {
  const std::string owner = absl::StrCat("tenant `", spec_.name, "`");
  auto make = [&](Quota q, const std::string& device) {
    return std::make_shared<Budget>(owner, quota_noun(q, device),
                                    absl::StrCat("tenants.", spec_.name, ".", quota_key(q)),
                                    spec_.quotas[q]);
  };
  for (int i = 0; i < kQuotaCount; ++i) {
    const Quota q = static_cast<Quota>(i);
    if (q != Quota::kDeviceMemory) budgets_[i] = make(q, "");
  }
  for (const std::string& id : device_ids) device_memory_.push_back(make(Quota::kDeviceMemory, id));
  // A daemon without devices still answers for device memory (nothing fits).
  if (device_memory_.empty()) device_memory_.push_back(make(Quota::kDeviceMemory, "no device"));
}

const std::shared_ptr<Budget>& Tenant::budget(Quota quota, size_t device) const {
  if (quota == Quota::kDeviceMemory)
    return device_memory_[std::min(device, device_memory_.size() - 1)];
  return budgets_[static_cast<int>(quota)];
}

int higher_classes(const TenantSpec& tenant, const std::vector<TenantSpec>& all) {
  std::vector<int32_t> classes;
  for (const TenantSpec& t : all) {
    if (t.priority > tenant.priority &&
        std::find(classes.begin(), classes.end(), t.priority) == classes.end())
      classes.push_back(t.priority);
  }
  return static_cast<int>(classes.size());
}

int tenant_nice(const TenantSpec& tenant, const std::vector<TenantSpec>& all) {
  uint32_t heaviest = tenant.weight;
  for (const TenantSpec& t : all)
    if (t.priority == tenant.priority) heaviest = std::max(heaviest, t.weight);
  const double halvings = std::log2(static_cast<double>(heaviest) / std::max(tenant.weight, 1u));
  const int nice = 10 * higher_classes(tenant, all) + static_cast<int>(std::lround(3.0 * halvings));
  return std::min(nice, 19);
}

Tenants::Tenants(std::vector<TenantSpec> specs, std::vector<std::string> device_ids)
    : device_ids_(std::move(device_ids)) {
  default_spec_.name = "default";
  for (const TenantSpec& spec : specs)
    if (spec.name == "default") default_spec_ = spec;
  specs_ = specs;
  if (std::none_of(specs_.begin(), specs_.end(),
                   [](const TenantSpec& s) { return s.name == "default"; }))
    specs_.push_back(default_spec_);
  absl::MutexLock lock(&mu_);
  for (TenantSpec& spec : specs) {
    if (spec.name == "default") continue;
    for (uint32_t uid : spec.uids) by_uid_[uid] = spec.name;
    for (const std::string& subject : spec.subjects) by_subject_[subject] = spec.name;
    const std::string name = spec.name;
    const int nice = tenant_nice(spec, specs_), above = higher_classes(spec, specs_);
    by_name_[name] = std::make_shared<Tenant>(std::move(spec), device_ids_, nice, above);
  }
  by_name_["default"] =
      std::make_shared<Tenant>(default_spec_, device_ids_, tenant_nice(default_spec_, specs_),
                               higher_classes(default_spec_, specs_));
}

std::shared_ptr<Tenant> Tenants::resolve(const CallerIdentity& caller) {
  std::string name = "default";
  if (!caller.token_tenant.empty()) {
    name = caller.token_tenant;
  } else if (auto s = by_subject_.find(caller.subject);
             !caller.subject.empty() && s != by_subject_.end()) {
    name = s->second;
  } else if (auto u = caller.uid ? by_uid_.find(*caller.uid) : by_uid_.end(); u != by_uid_.end()) {
    name = u->second;
  }
  absl::MutexLock lock(&mu_);
  std::shared_ptr<Tenant>& tenant = by_name_[name];
  if (!tenant) {
    // Named by a token only: the default settings, under its own name.
    TenantSpec spec = default_spec_;
    spec.name = name;
    spec.uids.clear();
    spec.subjects.clear();
    tenant =
        std::make_shared<Tenant>(std::move(spec), device_ids_, tenant_nice(default_spec_, specs_),
                                 higher_classes(default_spec_, specs_));
  }
  return tenant;
}

std::vector<std::shared_ptr<Tenant>> Tenants::all() const {
  std::vector<std::shared_ptr<Tenant>> out;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [name, tenant] : by_name_) out.push_back(tenant);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    if ((a->name() == "default") != (b->name() == "default")) return a->name() == "default";
    return a->name() < b->name();
  });
  return out;
}

}  // namespace kad::server
