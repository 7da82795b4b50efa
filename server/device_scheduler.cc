#include "server/device_scheduler.h"

#include <algorithm>
#include <optional>
#include <tuple>

namespace kad::server {

// A tenant's claim on one device, shared by its queues there.
struct DeviceScheduler::Flow::Share {
  const void* tenant = nullptr;
  uint32_t weight = 1;
  int32_t priority = 0;
  double vtime = 0;           // device nanoseconds over the weight
  uint32_t active_flows = 0;  // its flows with launches on the device or waiting
  absl::Time idle_since = absl::InfinitePast();
};

uint32_t DeviceScheduler::contended_depth(uint32_t depth, OneTenantsQueues queues,
                                          uint64_t compute_units) {
  depth = std::max<uint32_t>(depth, 1);
  if (queues == OneTenantsQueues::kFirstLaunchAtOnce) return std::max<uint32_t>(depth / 16, 1);
  // Bounded by the depth before the product: a driver's count of units
  // must not overflow it into no slot at all.
  const uint64_t units = std::clamp<uint64_t>(compute_units, 1, depth);
  const uint64_t slots = kWorkerSlotsPerComputeUnit * units;
  return static_cast<uint32_t>(std::min<uint64_t>(slots, depth));
}

DeviceScheduler::DeviceScheduler(uint32_t depth, OneTenantsQueues queues, uint64_t compute_units)
    : depth_(std::max<uint32_t>(depth, 1)),
      contended_depth_(contended_depth(depth, queues, compute_units)),
      lower_class_cap_(std::max<uint32_t>(contended_depth_ / 4, 1)),
      first_launch_at_once_(queues == OneTenantsQueues::kFirstLaunchAtOnce),
      compute_units_(static_cast<uint32_t>(std::clamp<uint64_t>(compute_units, 1, 1u << 20))) {
  // Reserved now, so that a launch that must wait allocates nothing.
  absl::MutexLock lock(&mu_);
  waiters_.reserve(64);
  lent_.reserve(64);
  classes_.reserve(8);
  recent_ends_.reserve(kRecentEnds + 1);
}

DeviceScheduler::Class& DeviceScheduler::class_locked(int32_t priority) {
  for (Class& c : classes_)
    if (c.priority == priority) return c;
  classes_.push_back({priority, 0, 0, absl::InfinitePast()});
  return classes_.back();
}

namespace {
bool active(const DeviceScheduler::Flow& f) { return f.in_flight() > 0 || f.held() > 0; }
}  // namespace

void DeviceScheduler::note_active_locked(Flow& flow, bool was) {
  const bool now = active(flow);
  if (now && !was) {
    ++active_flows_;
    ++flow.share_.active_flows;
    // Another tenant's launch, or more queues than compute units: lent
    // channels come back, and their launches take turns with the others.
    const bool crowding = !crowded_ && active_flows_ > compute_units_;
    crowded_ = crowded_ || crowding;
    for (Flow* f : lent_)
      if (crowding || &f->share_ != &flow.share_) recall_locked(*f);
  }
  if (was && !now) {
    --active_flows_;
    flow.idle_since_ = absl::Now();
    if (--flow.share_.active_flows == 0) flow.share_.idle_since = flow.idle_since_;
    if (crowded_ && active_flows_ <= compute_units_) {
      crowded_ = false;
      calm_since_ = flow.idle_since_;
    }
  }
}

void DeviceScheduler::add_in_flight_locked(Flow& flow, int64_t delta) {
  const bool was = active(flow);
  const uint32_t before = flow.in_flight_;
  flow.in_flight_ = static_cast<uint32_t>(flow.in_flight_ + delta);
  beyond_first_ =
      beyond_first_ - std::max<uint32_t>(before, 1) + std::max<uint32_t>(flow.in_flight_, 1);
  note_active_locked(flow, was);
  in_flight_ = static_cast<uint32_t>(in_flight_ + delta);
  Class& c = class_locked(flow.share_.priority);
  c.in_flight = static_cast<uint32_t>(c.in_flight + delta);
  // Only a device with several classes needs to know when each was busy.
  if (classes_.size() > 1) c.active = absl::Now();
}

bool DeviceScheduler::capped_locked(int32_t priority, absl::Time now) const {
  for (const Class& c : classes_) {
    if (c.priority > priority && (c.in_flight > 0 || c.held > 0 || now - c.active < kClassLinger))
      return true;
  }
  return false;
}

DeviceScheduler::~DeviceScheduler() = default;

DeviceScheduler::Flow::~Flow() { scheduler_.leave(*this); }

std::unique_ptr<DeviceScheduler::Flow> DeviceScheduler::join(const void* tenant, uint32_t weight,
                                                             int32_t priority) {
  absl::MutexLock lock(&mu_);
  Flow::Share* share = nullptr;
  for (const auto& s : shares_)
    if (s->tenant == tenant) share = s.get();
  if (share == nullptr) {
    shares_.push_back(std::make_unique<Flow::Share>());
    share = shares_.back().get();
    share->tenant = tenant;
    share->weight = std::max<uint32_t>(weight, 1);
    share->priority = priority;
    // A tenant new to the device starts level with the others.
    bool first = true;
    for (const auto& s : shares_) {
      if (s.get() == share) continue;
      share->vtime = first ? s->vtime : std::max(share->vtime, s->vtime);
      first = false;
    }
  }
  (void)class_locked(share->priority);
  auto flow = std::unique_ptr<Flow>(new Flow(*this, *share));
  flow->estimate_ns_ = mean_launch_ns_;
  return flow;
}

void DeviceScheduler::leave(Flow& flow) {
  absl::MutexLock lock(&mu_);
  end_loan_locked(flow);
  // What its slots were charged stays with its tenant: they were used, or
  // will be, by launches no one measures now.
  add_in_flight_locked(flow, -static_cast<int64_t>(flow.in_flight_));
  flow.charged_ns_ = 0;
  class_locked(flow.share_.priority).held -= flow.held_;
  held_now_ -= flow.held_;
  const bool was = active(flow);
  flow.held_ = flow.granted_ = 0;
  note_active_locked(flow, was);
  std::erase(waiters_, &flow);
  grant_locked();
}

bool DeviceScheduler::only_tenant_locked(const Flow& flow, absl::Time now) const {
  return first_launch_at_once_ && !other_tenants_locked(flow, now);
}

bool DeviceScheduler::other_tenants_locked(const Flow& flow, absl::Time now) const {
  return std::any_of(shares_.begin(), shares_.end(), [&](const auto& s) {
    return s.get() != &flow.share_ && (s->active_flows > 0 || now - s->idle_since < kIdleCatchUp);
  });
}

bool DeviceScheduler::lend_locked(Flow& flow, ChannelLoans::Lender& lender) {
  const absl::Time now = absl::Now();
  if (flow.lent_to_ != nullptr || !waiters_.empty() || crowded_ ||
      now - calm_since_ < kIdleCatchUp || active_flows_ + (active(flow) ? 0 : 1) > compute_units_ ||
      in_flight_ >= contended_depth_ || other_tenants_locked(flow, now))
    return false;
  flow.lent_to_ = &lender;
  flow.recalled_ = false;
  lent_.push_back(&flow);
  add_in_flight_locked(flow, 1);  // uncharged: the tenant is alone
  return true;
}

void DeviceScheduler::recall_locked(Flow& flow) {
  if (flow.recalled_) return;
  flow.recalled_ = true;
  flow.lent_to_->recall();
}

void DeviceScheduler::end_loan_locked(Flow& flow) {
  if (flow.lent_to_ == nullptr) return;
  flow.lent_to_ = nullptr;
  std::erase(lent_, &flow);
  add_in_flight_locked(flow, -1);
  grant_locked();
}

bool DeviceScheduler::room_locked(const Flow& flow, absl::Time now) {
  if (in_flight_ >= depth_) return false;
  if (classes_.size() > 1 && capped_locked(flow.share_.priority, now) &&
      class_locked(flow.share_.priority).in_flight >= lower_class_cap_)
    return false;
  // A queue that starts to use the device makes it contended: the others'
  // launches already on it are not taken back, new ones wait their turn.
  if (active_flows_ - (active(flow) ? 1 : 0) == 0) return true;  // alone: all of it
  if (only_tenant_locked(flow, now))
    return flow.in_flight_ == 0 || beyond_first_ < contended_depth_;
  return in_flight_ < contended_depth_;
}

bool DeviceScheduler::try_take_locked(Flow& flow) {
  const absl::Time now = clock_locked();
  // Launches that wait go first; but while its tenant is alone, a queue's
  // first launch takes none of the slots they wait for.
  if (!waiters_.empty() && !(flow.in_flight_ == 0 && only_tenant_locked(flow, now))) return false;
  if (!room_locked(flow, now)) return false;
  charge_locked(flow);
  add_in_flight_locked(flow, 1);
  return true;
}

void DeviceScheduler::hold_locked(Flow& flow) {
  // The device is contended: lent channels come back, and their launches
  // wait their turns too. (A queue alone that fills the device waits for
  // its own launches: its loan at the wait that ends them is not held up.)
  for (Flow* f : lent_) recall_locked(*f);
  const bool was = active(flow);
  // Whether the flow, and its tenant, come back from a real pause.
  bool flow_rested = false, tenant_rested = false;
  if (!was) {
    const absl::Time now = absl::Now();
    flow_rested = now - flow.idle_since_ >= kIdleCatchUp;
    tenant_rested = flow.share_.active_flows == 0 && now - flow.share_.idle_since >= kIdleCatchUp;
  }
  ++flow.held_;
  note_active_locked(flow, was);
  ++class_locked(flow.share_.priority).held;
  ++held_now_;
  ++held_total_;
  if (!flow.waiting_) {
    catch_up_locked(flow, tenant_rested, flow_rested);
    flow.waiting_ = true;
    waiters_.push_back(&flow);
  }
  grant_locked();
}

void DeviceScheduler::dispatched_locked(Flow& flow, bool sent) {
  const bool was = active(flow);
  --flow.held_;
  --flow.granted_;
  note_active_locked(flow, was);
  --class_locked(flow.share_.priority).held;
  --held_now_;
  if (!sent) give_back_locked(flow);
}

void DeviceScheduler::give_back_locked(Flow& flow) {
  add_time(flow, -refund(flow, 1));  // the launch never ran
  add_in_flight_locked(flow, -1);
  grant_locked();
}

void DeviceScheduler::release_locked(Flow& flow, uint32_t n, Measured measured) {
  n = std::min(n, flow.in_flight_);
  if (n == 0) return;
  measured.launches = std::min(measured.launches, n);
  // Launches the driver did not time cost what they were charged.
  const double charged = refund(flow, n);
  const double unmeasured = charged * (n - measured.launches) / n;
  add_time(flow, measured.ns + unmeasured - charged);
  if (measured.launches > 0) {
    // Recent launches weigh most: a queue whose kernels change is charged
    // their new cost within a few launches.
    const double mean = measured.ns / measured.launches;
    flow.estimate_ns_ += (mean - flow.estimate_ns_) / 4;
    mean_launch_ns_ += (mean - mean_launch_ns_) / 16;
  }
  add_in_flight_locked(flow, -static_cast<int64_t>(n));
  grant_locked();
}

double DeviceScheduler::busy_time_locked(uint64_t start_ns, uint64_t end_ns) {
  if (end_ns <= start_ns) return 0;
  const auto at = std::lower_bound(recent_ends_.begin(), recent_ends_.end(), end_ns);
  const uint64_t from = at == recent_ends_.begin() ? start_ns : std::max(start_ns, *(at - 1));
  recent_ends_.insert(at, end_ns);
  if (recent_ends_.size() > kRecentEnds) recent_ends_.erase(recent_ends_.begin());
  return static_cast<double>(end_ns - from);
}

bool DeviceScheduler::others_wait_locked(const Flow& flow) const {
  return std::any_of(waiters_.begin(), waiters_.end(), [&](const Flow* f) { return f != &flow; });
}

void DeviceScheduler::grant_locked() {
  const absl::Time now = clock_locked();
  while (in_flight_ < depth_ && !waiters_.empty()) {
    // Highest priority class, then the tenant furthest behind, then its
    // queue furthest behind; only those the device has room for (a lower
    // class below its cap).
    auto best = waiters_.end();
    for (auto it = waiters_.begin(); it != waiters_.end(); ++it) {
      const Flow* f = *it;
      if (!room_locked(*f, now)) continue;
      if (best == waiters_.end() ||
          std::make_tuple(-f->share_.priority, f->share_.vtime, f->vtime_) <
              std::make_tuple(-(*best)->share_.priority, (*best)->share_.vtime, (*best)->vtime_))
        best = it;
    }
    if (best == waiters_.end()) return;  // none has room
    Flow& flow = **best;
    charge_locked(flow);
    ++flow.granted_;
    add_in_flight_locked(flow, 1);
    if (flow.granted_ >= flow.held_) {
      flow.waiting_ = false;
      waiters_.erase(best);
    }
  }
}

void DeviceScheduler::charge_locked(Flow& flow) {
  add_time(flow, flow.estimate_ns_);
  flow.charged_ns_ += flow.estimate_ns_;
}

void DeviceScheduler::add_time(Flow& flow, double ns) {
  flow.vtime_ += ns;
  flow.share_.vtime += ns / flow.share_.weight;
}

double DeviceScheduler::refund(Flow& flow, uint32_t n) {
  if (flow.in_flight_ == 0) return 0;
  const double r = flow.charged_ns_ * std::min(n, flow.in_flight_) / flow.in_flight_;
  flow.charged_ns_ -= r;
  return r;
}

void DeviceScheduler::catch_up_locked(Flow& flow, bool tenant_rested, bool flow_rested) {
  if (!tenant_rested && !flow_rested) return;
  // The least virtual time among the tenants waiting in the flow's class.
  std::optional<double> now, flows_now;
  for (const Flow* f : waiters_) {
    if (f->share_.priority != flow.share_.priority) continue;
    if (!now || f->share_.vtime < *now) now = f->share_.vtime;
    if (&f->share_ == &flow.share_ && (!flows_now || f->vtime_ < *flows_now)) flows_now = f->vtime_;
  }
  if (now && tenant_rested) flow.share_.vtime = std::max(flow.share_.vtime, *now);
  if (flows_now && flow_rested) flow.vtime_ = std::max(flow.vtime_, *flows_now);
}

DeviceScheduler::Stats DeviceScheduler::stats() const {
  absl::MutexLock lock(&mu_);
  Stats s;
  s.depth = depth_;
  s.contended_depth = contended_depth_;
  s.in_flight = in_flight_;
  s.waiting_queues = waiters_.size();
  s.held = held_now_;
  s.held_total = held_total_;
  s.latency = latency_.snapshot();
  return s;
}

}  // namespace kad::server
