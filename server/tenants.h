// Tenants (DESIGN §8): whom a caller is decides which tenant its sessions
// count against, and every tenant has its own quotas. A bearer token names
// its tenant; a client certificate's subject or a UNIX peer's uid is looked
// up in the `[tenants.NAME]` tables of the config; anyone else is the
// `default` tenant. Over a quota, a request is RESOURCE_EXHAUSTED naming
// the quota, the tenant, what is in use, what was asked and the limit, and
// other tenants are served as before.
//
// A Budget is one bounded count (a tenant's queues, its device memory on
// one device, the daemon's own host memory); a Charge is some of it, given
// back when the charge goes. Objects that hold a resource hold its charge,
// so use returns to zero when they go, however they go.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace kad::server {

enum class Quota : int {
  kSessions,
  kDeviceMemory,  // bytes, per device
  kQueues,
  kStreams,   // Submit streams open
  kChannels,  // shared-memory channels open
  kModuleBytes,
  kKernels,  // kernels got (GetKernel), each compiled once per specialization
  kLaunchesInFlight,
};
inline constexpr int kQuotaCount = 8;

// The config key of a quota in `[tenants.NAME]` ("device_memory_bytes"), and
// what it counts, for messages ("bytes of device memory on DEVICE").
const char* quota_key(Quota quota);

struct TenantQuotas {
  // Indexed by Quota. The defaults let one tenant use a workstation fully
  // and bound what a runaway client can make the daemon hold.
  std::array<uint64_t, kQuotaCount> limit = {
      256,                  // sessions
      uint64_t{64} << 30,   // device memory bytes, per device
      1024,                 // queues
      256,                  // Submit streams
      256,                  // shared-memory channels
      uint64_t{256} << 20,  // module bytes
      4096,                 // kernels
      65536,                // launches in flight
  };
  uint64_t operator[](Quota q) const { return limit[static_cast<int>(q)]; }
  uint64_t& operator[](Quota q) { return limit[static_cast<int>(q)]; }
};

struct TenantSpec {
  std::string name;
  uint32_t weight = 1;   // its share of a device against tenants of its priority
  int32_t priority = 0;  // higher first
  TenantQuotas quotas;
  std::vector<uint32_t> uids;         // UNIX socket peers that are this tenant
  std::vector<std::string> subjects;  // client certificate subjects (mutual TLS)
};

// Who a call comes from, as far as its transport can tell.
struct CallerIdentity {
  std::string token_tenant;     // the tenant its bearer token names
  std::string subject;          // its client certificate's subject
  std::optional<uint32_t> uid;  // its uid, for a UNIX socket peer
};

class Budget {
 public:
  // `owner` ("tenant `alice`"), `what` ("bytes of device memory on X") and
  // `setting` ("tenants.alice.device_memory_bytes") name it in messages.
  Budget(std::string owner, std::string what, std::string setting, uint64_t limit)
      : owner_(std::move(owner)),
        what_(std::move(what)),
        setting_(std::move(setting)),
        limit_(limit) {}

  // Takes `amount`, or RESOURCE_EXHAUSTED saying whose quota, the use, the
  // amount asked and the limit. Allocates nothing on success.
  absl::Status take(uint64_t amount);
  void give_back(uint64_t amount) { used_.fetch_sub(amount, std::memory_order_relaxed); }
  // Counts `amount` that is already in use, unchecked: launches a check let
  // through (see Engine::launch).
  void add(uint64_t amount) { used_.fetch_add(amount, std::memory_order_relaxed); }
  uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  uint64_t limit() const { return limit_; }
  // RESOURCE_EXHAUSTED for `asked` more, as take() words it; counted as a
  // refusal.
  absl::Status exhausted(uint64_t asked) const;
  uint64_t refusals() const { return refusals_.load(std::memory_order_relaxed); }

 private:
  std::string owner_, what_, setting_;
  uint64_t limit_;
  std::atomic<uint64_t> used_{0};
  mutable std::atomic<uint64_t> refusals_{0};
};

// Some of a budget, held by what uses it; given back when it goes.
class Charge {
 public:
  Charge() = default;
  static absl::StatusOr<Charge> take(std::shared_ptr<Budget> budget, uint64_t amount);
  Charge(Charge&& other) noexcept
      : budget_(std::move(other.budget_)), amount_(std::exchange(other.amount_, 0)) {}
  Charge& operator=(Charge&& other) noexcept {
    if (this != &other) {
      release();
      budget_ = std::move(other.budget_);
      amount_ = std::exchange(other.amount_, 0);
    }
    return *this;
  }
  ~Charge() { release(); }

  // Takes `amount` more of the same budget (a session's modules, one by one).
  absl::Status grow(uint64_t amount);
  // Gives `amount` back early (what grow() took for something that failed).
  void shrink(uint64_t amount) {
    amount = std::min(amount, amount_);
    if (budget_) budget_->give_back(amount);
    amount_ -= amount;
  }
  uint64_t amount() const { return amount_; }

 private:
  Charge(std::shared_ptr<Budget> budget, uint64_t amount)
      : budget_(std::move(budget)), amount_(amount) {}
  void release() {
    if (budget_ && amount_ > 0) budget_->give_back(amount_);
    amount_ = 0;
  }
  std::shared_ptr<Budget> budget_;
  uint64_t amount_ = 0;
};

class Tenant {
 public:
  // `nice`: tenant_nice() of its spec among the configured tenants;
  // `higher_classes`: higher_classes() of it.
  Tenant(TenantSpec spec, const std::vector<std::string>& device_ids, int nice,
         int higher_classes = 0);

  const TenantSpec& spec() const { return spec_; }
  // The niceness (0 to 19) of the processes that run its kernels on CPU
  // devices: its share of the CPU against other tenants (Tenants sets it).
  int nice() const { return nice_; }
  // The configured priority classes above its own (its CPU group's weight).
  int higher_classes() const { return higher_classes_; }
  const std::string& name() const { return spec_.name; }
  // The budget of `quota` (of device `device`, an index into the daemon's
  // devices, for kDeviceMemory).
  const std::shared_ptr<Budget>& budget(Quota quota, size_t device = 0) const;
  absl::StatusOr<Charge> charge(Quota quota, uint64_t amount, size_t device = 0) const {
    return Charge::take(budget(quota, device), amount);
  }

 private:
  TenantSpec spec_;
  const int nice_;
  const int higher_classes_;
  std::array<std::shared_ptr<Budget>, kQuotaCount> budgets_;
  std::vector<std::shared_ptr<Budget>> device_memory_;  // one per device
};

// The niceness of a tenant's CPU workers: priority classes ten steps apart
// (the highest at 0; about 9:1 CPU per class under Linux's scheduler, near
// strict), and within a class each halving of the weight against the
// class's heaviest three steps more (Linux gives about 1.25x per step, so
// weights 1:2:4 share about 1:2:4), at most 19.
int tenant_nice(const TenantSpec& tenant, const std::vector<TenantSpec>& all);
// How many distinct priorities above `tenant`'s the tenants `all` have.
int higher_classes(const TenantSpec& tenant, const std::vector<TenantSpec>& all);

class Tenants {
 public:
  // `specs` may name `default`, whose settings then apply to every caller
  // no other tenant names (and to tenants named only by a token).
  Tenants(std::vector<TenantSpec> specs, std::vector<std::string> device_ids);

  // The caller's tenant: the token's, else the one its subject or uid
  // names, else the default one.
  std::shared_ptr<Tenant> resolve(const CallerIdentity& caller);
  // Every tenant so far, the default first, then by name.
  std::vector<std::shared_ptr<Tenant>> all() const;

 private:
  std::vector<std::string> device_ids_;
  TenantSpec default_spec_;
  std::vector<TenantSpec> specs_;  // every configured tenant, default included
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<Tenant>> by_name_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint32_t, std::string> by_uid_;
  absl::flat_hash_map<std::string, std::string> by_subject_;
};

}  // namespace kad::server
