// Where a kernel's launches of several work-groups run, in a worker whose
// narrow device runs a kernel in the enqueuing thread, on one core (PoCL's
// `basic`), beside a wide device that spreads the work-groups over every
// core (PoCL's `pthread`, on the same memory; launch_executor.h).
//
// Neither wins by a rule of thumb: a launch on the wide device, however
// small, costs a hand-off to PoCL's pool and back (25-50 µs on the 2-core
// VM), so a short kernel is faster on one core, and a long kernel of many
// work-groups N times slower there on N cores. Nor does one measurement
// settle it for good: a kernel's launches change size, and a kernel that
// became small kept on the wide device would pay the hand-off at every
// launch, with nothing to show that one core would now do better. So the
// choice is measured, and measured again:
// - a kernel starts on the narrow device; once two of its launches in a row
//   took kWorthTrying or more there, the next ones try the wide device
//   (two: the first there may be long for the driver's lazy build);
// - whether a launch on one core was long is told by the CPU time of the
//   thread that ran it, not by the time from its enqueue to its end (its wall
//   time): on a busy machine (16 sessions on 2 cores) a launch of 5 µs of
//   work often takes 200 µs or more, and a kernel moved to the wide device on
//   that count would pay its build there (0.5 s of CPU) and a hand-off to a
//   pool at every launch, on cores that no session has spare. Reading the
//   thread's CPU clock is a system call, so a launch is timed on it only
//   where its kernel's launch before it took kWorthTrying or more (which the
//   CPU time, never longer, is then checked against), and for a sample;
//   launches of kWorthTrying or more on the CPU clock go on being timed so;
// - but which device is faster is told by wall times on both: that is what
//   the client waits for, and a machine busy enough to stretch a launch on
//   one core stretches one over every core too; except that a sample on one
//   core under a quarter of kWorthTrying on its CPU clock (about a hand-off
//   to the pool and back) always brings the kernel back there;
// - from then on, the device a kernel is on gets its launches, and every
//   `interval`-th launch tries the other one (a sample). A sample that beats
//   the device it is on by a fifth (time per work-item, so that launches of
//   different sizes compare) moves the kernel there, and the interval starts
//   again at kFirstInterval; one that does not doubles the interval, up to
//   kMaxInterval: what stays true is checked less and less often;
// - on the narrow device, launches under kWorthTrying never try the wide
//   one (nothing to gain from N cores that would pay for the hand-off).
// A sample costs at most one launch on the slower device in `interval`.
//
// Launches of one work-group (one core on either device) neither move a
// kernel nor count. Launches of several queues may note at once: the counts
// are then approximate, never wrong in a way that matters (a sample early
// or late).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace kad::server::worker {

class WideChoice {
 public:
  // A launch this long on one core may gain from the wide device.
  static constexpr int64_t kWorthTrying = 200'000;  // ns
  static constexpr uint32_t kFirstInterval = 8;
  static constexpr uint32_t kMaxInterval = 1024;

  // Whether the next launch of `groups` work-groups runs on the wide device.
  bool runs_wide(uint64_t groups) const {
    return groups >= 2 && !ruled_out_.load(std::memory_order_relaxed) && on_wide() != sample_due();
  }
  // Whether the next launch of `groups` work-groups may involve the wide
  // device: it runs there, or it is a sample of the narrow device for a
  // kernel that is on the wide one (either way not a launch to run inline).
  bool involves_wide(uint64_t groups) const {
    return groups >= 2 && !ruled_out_.load(std::memory_order_relaxed) &&
           (on_wide() || sample_due());
  }
  // Whether the next launch of `groups` work-groups, if it runs on the
  // narrow device, is to be timed on its thread's CPU clock.
  bool wants_cpu_time(uint64_t groups) const {
    return groups >= 2 && !ruled_out_.load(std::memory_order_relaxed) &&
           (maybe_long_.load(std::memory_order_relaxed) || on_wide());
  }
  // A launch of `items` work-items in `groups` work-groups took `ns` from
  // its enqueue to its end, on the wide device (`ran_wide`) or the narrow
  // one, where also `cpu_ns` on its thread's CPU clock (-1: not timed so).
  void note(bool ran_wide, uint64_t groups, uint64_t items, int64_t ns, int64_t cpu_ns);
  // The kernel has no build for the wide device: it stays narrow.
  void rule_out() { ruled_out_.store(true, std::memory_order_relaxed); }

  bool on_wide() const { return on_wide_.load(std::memory_order_relaxed); }
  uint32_t interval() const { return interval_.load(std::memory_order_relaxed); }

 private:
  struct LastLaunch {
    std::atomic<int64_t> ns{0};
    std::atomic<uint64_t> items{0};
  };
  bool sample_due() const {
    return since_sample_.load(std::memory_order_relaxed) >=
           interval_.load(std::memory_order_relaxed);
  }

  std::atomic<bool> on_wide_{false};
  std::atomic<bool> ruled_out_{false};
  // The last launch on one core took kWorthTrying or more (from enqueue to
  // end, or on the CPU clock): the next one there is timed on the CPU clock.
  std::atomic<bool> maybe_long_{false};
  // Launches on the device it is on since the last sample (on the narrow
  // device: in a row of kWorthTrying or more).
  std::atomic<uint32_t> since_sample_{0};
  // Two at first: the first launch of a kernel may be long only because
  // the driver builds its work-group function then (PoCL does, lazily).
  std::atomic<uint32_t> interval_{2};
  LastLaunch narrow_, wide_;
};

}  // namespace kad::server::worker
