// Which session's launch goes to a shared device next (DESIGN §8).
//
// A device that several sessions share in this process (a GPU, or a CPU
// device when kad runs no workers) takes at most `depth` launches of all
// sessions together. Past that, launches wait in kad (ScheduledQueue) and go
// to the device as earlier ones end, in this order:
//   1. strict priority between tenants' priority classes (higher first);
//   2. within a class, weighted fair share between tenants: each tenant has a
//      virtual time that each of its launches advances by the time it ran on
//      the device over the tenant's weight, and the tenant furthest behind
//      goes next;
//   3. within a tenant, the same between its queues, of equal weight.
// A share counts device time, from the driver's profiling timestamps
// (Queue::device_times): a tenant of long kernels gets fewer launches than
// one of short kernels, not more of the device. A launch is charged when it
// is granted a slot, at its queue's recent mean time per launch (order must
// be decided before the time is known), and the charge is trued up to its
// busy time (busy_time_locked) when it ends. Where the driver times nothing,
// every launch costs the same estimate: a share counts launches. (What kad
// sees without the driver would not do: under contention the time between a
// queue's completions measures the others' launches as much as its own.)
//
// One queue alone may fill the device to `depth` (a pipelining client keeps
// it busy). While several tenants' queues have launches on it or waiting for
// it, it takes only depth/16 (at least one; where sessions run in workers,
// 4 per compute unit, below): devices run the launches of all
// their queues side by side (PoCL does; so do a GPU's hardware queues), so a
// queue with a launch on the device gets its turn there whatever its
// weight, and only a shallow queue lets the order above decide the shares
// (and bounds how many launches a newcomer waits behind).
//
// While the queues that compete are all one tenant's (no other tenant's
// within kIdleCatchUp), there are no weights to keep: each queue's first
// launch on the device takes a slot at once, up to `depth`, and only the
// launches beyond each queue's first share depth/16. Synchronous clients
// (one launch each) then never wait in kad for one another: with the
// contended depth for them too, 32 of them took turns at 4 slots, each turn
// a chain of wake-ups, and left the machine 40 % idle
// (bench/results/2026-12-02-waiting-client-dispatches). A pipelining
// queue of the same tenant still keeps at most depth/16 beyond its first, so
// a newcomer's first launch goes at once, as any of a synchronous client's.
// Not on a device whose sessions run in workers (OneTenantsQueues): there,
// equal synchronous clients' turns at the contended depth are what keeps
// their workers even on the cores (32 clients on 2 cores: Jain's index
// 0.67-0.99 with first launches at once, 1.00 with turns; DESIGN §9 asks
// 0.95; bench/results/2026-12-03-first-launch-at-once).
//
// While a higher priority class is busy (launches on the device or waiting,
// or some within the last kClassLinger), lower classes hold at most a
// quarter of that (at least one slot): a high-priority launch waits behind
// few lower ones on the device.
//
// A CPU device whose sessions run in workers is scheduled too: a launch
// goes to its session's worker once granted. The workers' launches on the
// device then share the cores by the tenants' CPU groups and niceness
// (tenants.h). Fewer launches on the device while workers compete (one or
// two: each takes all the cores) kept weights no better in the benchmarks
// and cost throughput: every slot that comes free there is a round trip
// to a worker. So there the contended depth is 4 launches per compute
// unit (within depth): a worker on PoCL's `basic` computes a launch on one
// core, and fewer slots than cores would leave cores idle however many
// clients wait (depth/16 did: 4 slots on any machine). On 2 cores, 8 slots
// gave 32 synchronous clients 32.0k launches/s against 27.5k at 4 (means
// of 12 and 15 runs), Jain's index 1.00 either way, and weights 4:1 still
// 0.80-0.82 of the device; 12
// and 16 slots let 16 clients' workers share the cores unevenly again (Jain
// 0.61-0.96; bench/results/2026-12-05-worker-contended-depth). Measured on
// 2 cores only: whether 4 per unit is the knee on more is not known.
//
// The direct path (--shm-direct) lends a queue's shared-memory channel to
// its session's worker, whose launches then reach the device without kad:
// the scheduler sees none of them, only the loan, which holds one slot (a
// worker runs its launches one at a time). So a queue is lent only while
// the device is not contended: its tenant alone on the device (no other
// tenant's launches on it or waiting, nor within kIdleCatchUp), no more
// queues with launches on it (lent ones included) than it has compute
// units (nor within kIdleCatchUp), and no launch waiting for a slot.
// Then another tenant's first launch on the device takes every other
// tenant's lent channel back (ChannelLoans::Lender::recall), and a queue
// beyond one per compute unit, or a launch that must wait for a slot, takes
// every lent channel back: from then on their launches come through kad and
// take their turns by weight, and one tenant's queues theirs as equals.
// Lent further, nobody shares the cores between lent sessions but the
// kernel's scheduler, which split them unevenly: 16 and 32 synchronous
// clients of one tenant on 2 cores had Jain's index 0.18-0.99 against 1.00
// through kad (lent and unlent clients ran at rates 10x apart), and 4 all
// lent 0.72-1.00 against 0.80-1.00 (bench/results/2026-12-07-direct-by-default).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/channel_loans.h"
#include "server/latency_histogram.h"

namespace kad::server {

// The device time of launches that ended, as far as the driver timed it.
struct MeasuredLaunches {
  uint32_t launches = 0;  // how many of the ended launches were timed
  double ns = 0;          // their device time, together
};

class DeviceScheduler {
 public:
  // One queue's claim on the device. All its fields are the scheduler's,
  // under its mutex.
  class Flow {
   public:
    ~Flow();
    Flow(const Flow&) = delete;
    Flow& operator=(const Flow&) = delete;

    uint32_t in_flight() const { return in_flight_; }
    uint32_t granted() const { return granted_; }
    uint32_t held() const { return held_; }
    // What a launch of this flow is charged when granted: the mean device
    // time of its recent launches, in nanoseconds.
    double estimate_ns() const { return estimate_ns_; }

   private:
    friend class DeviceScheduler;
    struct Share;
    Flow(DeviceScheduler& scheduler, Share& share) : scheduler_(scheduler), share_(share) {}

    DeviceScheduler& scheduler_;
    Share& share_;
    double vtime_ = 0;        // within its tenant's share, in device nanoseconds
    double estimate_ns_ = 0;  // what its next launch is charged
    double charged_ns_ = 0;   // charged for its in-flight slots, not yet trued up
    uint32_t in_flight_ = 0;  // slots it holds: launches on the device, and grants not yet used
    uint32_t held_ = 0;       // launches waiting in kad for a slot
    uint32_t granted_ = 0;    // slots granted to held launches, not yet dispatched
    bool waiting_ = false;    // in the scheduler's waiters (held_ > granted_)
    absl::Time idle_since_ =
        absl::InfinitePast();                  // when it last had nothing on the device or waiting
    ChannelLoans::Lender* lent_to_ = nullptr;  // its channel's, while lent (lend_locked)
    bool recalled_ = false;                    // the loan was recalled (once is enough)
  };

  struct Stats {
    uint32_t depth = 0;
    uint32_t contended_depth = 0;  // what launches share while queues compete
    uint64_t in_flight = 0;        // launches on the device (and slots granted for them)
    uint64_t held = 0;             // launches waiting in kad for a slot
    uint64_t waiting_queues = 0;
    uint64_t held_total = 0;  // launches that ever waited in kad
    LatencyHistogram::Snapshot latency;
  };
  // Launch latencies on the device (its queues record them as launches end).
  LatencyHistogram& latency() { return latency_; }

  static constexpr absl::Duration kClassLinger = absl::Milliseconds(20);
  // A tenant (or queue) that had nothing on the device or waiting for longer
  // than this resumes level with those waiting, without the credit it had:
  // it does not bank idle time. A synchronous client's pause between its
  // launches is far shorter, and keeps its place (its weight holds).
  static constexpr absl::Duration kIdleCatchUp = absl::Milliseconds(20);
  // What a launch is charged before any launch on the device was measured
  // (and always, where the driver measures nothing).
  static constexpr double kUnmeasuredLaunchNs = 100'000;

  using Measured = MeasuredLaunches;

  // How the queues of one tenant share a contended device.
  enum class OneTenantsQueues {
    kFirstLaunchAtOnce,       // each queue's first launch goes at once (sessions in kad)
    kShareTheContendedDepth,  // every launch shares 4 slots per compute unit (sessions in workers)
  };
  // Where sessions run in workers, a launch computes on one of the
  // device's compute units (PoCL's `basic`): so many slots per unit keep
  // every unit busy while the launches' wake-ups chain, and no more.
  static constexpr uint64_t kWorkerSlotsPerComputeUnit = 4;
  // The slots launches share while queues compete: depth/16 (at least one)
  // where sessions share this process; kWorkerSlotsPerComputeUnit per
  // compute unit, within `depth`, where they run in workers.
  static uint32_t contended_depth(uint32_t depth, OneTenantsQueues queues, uint64_t compute_units);
  // `compute_units`: the device's, for kShareTheContendedDepth.
  explicit DeviceScheduler(uint32_t depth,
                           OneTenantsQueues queues = OneTenantsQueues::kFirstLaunchAtOnce,
                           uint64_t compute_units = 1);
  ~DeviceScheduler();

  uint32_t depth() const { return depth_; }
  absl::Mutex& mu() ABSL_LOCK_RETURNED(mu_) { return mu_; }

  // A new queue's flow, sharing `tenant`'s (any stable key; null for none)
  // weight and priority with the tenant's other queues on this device.
  std::unique_ptr<Flow> join(const void* tenant, uint32_t weight, int32_t priority);

  // A slot for a launch of `flow` now: only when the device has one free
  // and no other launch waits for one (they go first).
  bool try_take_locked(Flow& flow) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A launch of `flow` waits in kad; a slot is granted to it in fair order
  // (Flow::granted) once one is free.
  void hold_locked(Flow& flow) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A slot try_take_locked gave goes back unused (the driver refused the launch).
  void give_back_locked(Flow& flow) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A granted slot is used: the held launch went to the device (`sent`), or
  // its dispatch failed and the slot goes back.
  void dispatched_locked(Flow& flow, bool sent) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `n` launches of `flow` ended; `measured` says how long those the driver
  // timed ran on the device, and their charges are trued up to it.
  void release_locked(Flow& flow, uint32_t n, Measured measured = {})
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Some launch other than `flow`'s waits for a slot: the flows on the
  // device must learn when theirs end, so that slots come free.
  bool others_wait_locked(const Flow& flow) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool anyone_waits_locked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !waiters_.empty(); }
  // The device time a launch that ran from `start_ns` to `end_ns` (the
  // device's clock) is charged: from its start, or from the end of the
  // launch that ended last before it, if later, until its end. A launch's
  // own timestamps span the time it waited on the device behind other
  // queues' launches (PoCL stamps its start when it reaches the device, and
  // runs the launches there one after the other; a GPU whose launches fill
  // it does too), so the device is charged as busy with one launch at a
  // time, in the order they ended. Launches learnt of late are charged from
  // what was known then.
  double busy_time_locked(uint64_t start_ns, uint64_t end_ns) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The direct path: whether `flow`'s channel may be lent to its worker now
  // (the device not contended, above); if so the loan holds a slot, and the
  // first launch of another tenant that comes to the device, a queue beyond
  // one per compute unit, or any launch that must wait for a slot calls
  // `lender`'s recall() (under the scheduler's mutex: it must not block),
  // once per loan, until end_loan_locked.
  bool lend_locked(Flow& flow, ChannelLoans::Lender& lender) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void end_loan_locked(Flow& flow) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Grants what a higher class's lingering kept back once it lapsed: a queue
  // whose launches wait calls it every kClassLinger.
  void regrant_locked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { grant_locked(); }

  Stats stats() const;

 private:
  friend class Flow;
  void leave(Flow& flow);
  // Grants free slots to waiting launches, best first.
  void grant_locked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Asks the lender of `flow`'s loan to take its channel back, unless it
  // was asked already: a recall wakes two threads, and every launch held
  // while the channel comes back would ask again.
  void recall_locked(Flow& flow) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Charges `flow` (and its tenant) one launch, at its estimate.
  void charge_locked(Flow& flow) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds `ns` of device time (negative: a refund) to `flow` and its tenant.
  static void add_time(Flow& flow, double ns);
  // The charges of `n` of `flow`'s slots, taken back (they ended, or were
  // never used): their share of what is outstanding.
  static double refund(Flow& flow, uint32_t n);
  // A flow that starts to wait after a pause of kIdleCatchUp does not bank
  // the time it spent idle: it (`flow_rested`) or its tenant
  // (`tenant_rested`) resumes at the virtual time of those still waiting.
  void catch_up_locked(Flow& flow, bool tenant_rested, bool flow_rested)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // A priority class on this device: what it holds, and when it last did.
  struct Class {
    int32_t priority = 0;
    uint32_t in_flight = 0;
    uint64_t held = 0;
    absl::Time active;
  };
  Class& class_locked(int32_t priority) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `flow` gets (delta > 0) or gives back slots.
  void add_in_flight_locked(Flow& flow, int64_t delta) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether a higher class than `priority` keeps it to the lower classes' cap now.
  bool capped_locked(int32_t priority, absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Whether the device has room for one more launch of `flow` now: all of
  // its depth for one queue; while queues compete, a sixteenth, or, while
  // they are all `flow`'s tenant's, each queue's first launch and a
  // sixteenth beyond them; a lower class no more than its cap while a higher
  // one is busy. `now` is read only where a class or a tenant lingers
  // (clock_locked).
  bool room_locked(const Flow& flow, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether `flow`'s first launch goes at once: the device lets one
  // tenant's queues do so, and no tenant but `flow`'s has had launches on
  // the device or waiting within kIdleCatchUp.
  bool only_tenant_locked(const Flow& flow, absl::Time now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether a tenant other than `flow`'s has launches on the device or
  // waiting, or had within kIdleCatchUp.
  bool other_tenants_locked(const Flow& flow, absl::Time now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The time room_locked needs: none (InfinitePast) on a device that one
  // tenant in one class has used.
  absl::Time clock_locked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return classes_.size() > 1 || shares_.size() > 1 ? absl::Now() : absl::InfinitePast();
  }
  // Keeps active_flows_ and when flows and tenants went idle: `flow` had
  // launches on the device or waiting (`was`), and now may not, or the other
  // way round.
  void note_active_locked(Flow& flow, bool was) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const uint32_t depth_;
  const uint32_t contended_depth_;
  const uint32_t lower_class_cap_;
  const bool first_launch_at_once_;
  const uint32_t compute_units_;
  mutable absl::Mutex mu_;
  std::vector<Class> classes_ ABSL_GUARDED_BY(mu_);
  uint32_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  // The launches on the device beyond each queue's first: what shares the
  // contended depth while one tenant's queues compete.
  uint32_t beyond_first_ ABSL_GUARDED_BY(mu_) = 0;
  uint32_t active_flows_ ABSL_GUARDED_BY(mu_) = 0;  // with launches on the device or waiting
  uint64_t held_now_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t held_total_ ABSL_GUARDED_BY(mu_) = 0;
  // The mean device time of recent launches of all queues: a new queue's
  // first estimate.
  double mean_launch_ns_ ABSL_GUARDED_BY(mu_) = kUnmeasuredLaunchNs;
  // The ends of the device's recent timed launches, in order: what
  // busy_time_locked charges a launch from.
  static constexpr size_t kRecentEnds = 64;
  std::vector<uint64_t> recent_ends_ ABSL_GUARDED_BY(mu_);
  // Flows with launches waiting for a slot; a device has few queues.
  std::vector<Flow*> waiters_ ABSL_GUARDED_BY(mu_);
  // Flows whose channels are lent now (lend_locked).
  std::vector<Flow*> lent_ ABSL_GUARDED_BY(mu_);
  // Whether more queues than compute units have launches on the device
  // (since when not): no loan within kIdleCatchUp of it.
  bool crowded_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time calm_since_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  LatencyHistogram latency_;
  std::vector<std::unique_ptr<Flow::Share>> shares_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kad::server
