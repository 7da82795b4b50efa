#include "server/worker/wide_choice.h"

namespace kad::server::worker {

void WideChoice::note(bool ran_wide, uint64_t groups, uint64_t items, int64_t ns, int64_t cpu_ns) {
  if (groups < 2 || items == 0) return;
  // On one core: whether the launch was long (the wall time, never
  // shorter than the CPU time, tells where it is short).
  const bool long_on_one_core = cpu_ns >= 0 ? cpu_ns >= kWorthTrying : ns >= kWorthTrying;
  if (!ran_wide) {
    maybe_long_.store(long_on_one_core, std::memory_order_relaxed);
    // Long from enqueue to end, but maybe only for a busy machine: nothing
    // learnt; the next launch here is timed on the CPU clock.
    if (cpu_ns < 0 && long_on_one_core) return;
  }
  LastLaunch& mine = ran_wide ? wide_ : narrow_;
  const bool sample = ran_wide != on_wide();
  if (sample && ran_wide && wide_.items.load(std::memory_order_relaxed) == 0) {
    // The kernel's first launch there: it may be long only for the
    // driver's lazy build of it, so the next launch tries again.
  } else if (sample) {
    // Against the last launch on the device the kernel is on, per
    // work-item: ns / items < 4/5 * current_ns / current_items.
    const LastLaunch& current = ran_wide ? narrow_ : wide_;
    const double current_ns = static_cast<double>(current.ns.load(std::memory_order_relaxed));
    const double current_items = static_cast<double>(current.items.load(std::memory_order_relaxed));
    // A kernel now small on one core's CPU clock (a quarter of
    // kWorthTrying: about a hand-off to the pool and back) goes back there
    // whatever its wall time says, which a busy machine stretches more
    // than a hand-off. Not any kernel under kWorthTrying: one that comes
    // near it would go back and forth.
    const bool became_short = !ran_wide && cpu_ns >= 0 && cpu_ns < kWorthTrying / 4;
    const bool better = became_short || current_items == 0 ||
                        5.0 * static_cast<double>(ns) * current_items <
                            4.0 * current_ns * static_cast<double>(items);
    if (better) {
      on_wide_.store(ran_wide, std::memory_order_relaxed);
      interval_.store(kFirstInterval, std::memory_order_relaxed);
    } else {
      interval_.store(std::min(2 * interval(), kMaxInterval), std::memory_order_relaxed);
    }
    since_sample_.store(0, std::memory_order_relaxed);
  } else if (!ran_wide && !long_on_one_core) {
    since_sample_.store(0, std::memory_order_relaxed);  // nothing for the wide device to gain
  } else {
    since_sample_.fetch_add(1, std::memory_order_relaxed);
  }
  mine.ns.store(ns, std::memory_order_relaxed);
  mine.items.store(items, std::memory_order_relaxed);
}

}  // namespace kad::server::worker
