// A session's queue on a shared device, whose launches go to the device
// when its DeviceScheduler grants them a slot (DESIGN §8).
//
// Event ids are the queue's own, issued at submission and consecutive as
// the device's are: a launch that waits in kad has its id at once, and a
// wait for it waits until it went to the device and ended there. Launches go
// to the device in the order they were submitted. A launch that cannot be
// dispatched later (the driver refuses it) is reported by the next wait,
// naming the kernel's launch, as a launch's failure on the device is.
//
// Uncontended, a launch goes straight to the device from the caller's
// thread (also past the depth, when a look that does not wait finds some
// of the queue's launches ended and a slot free). Otherwise it waits in a
// ring of its own (the caller blocks once the ring is full), and the
// queue's pump thread (started by its first launch) dispatches it once
// granted a slot, and learns when the queue's launches end so that slots
// come free for everyone, whether or not the client ever waits.
//
// A client that waits does the pump's part itself while it can, so that a
// slot that comes free reaches the device through one thread woken, not
// two: a wait sends the queue's granted launches until its own has gone,
// and while it waits on the device for the queue's only launch there, the
// pump does not watch that launch too (a synchronous client's queue never
// wakes its pump).
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/backend.h"
#include "core/kernel.h"
#include "server/device_scheduler.h"

namespace kad::server {

class ScheduledQueue final : public Queue {
 public:
  // Launches that wait in kad per queue: past them, enqueue_kernel blocks
  // (about 3.5 KB each, made with the queue so that a launch allocates nothing).
  static constexpr uint32_t kHeldLaunches = 16;

  // The memory kad holds for one queue on a device of `depth`: what its
  // session is charged against the daemon's host-memory guard.
  static uint64_t host_bytes(uint32_t depth) {
    return uint64_t{kHeldLaunches} * sizeof(HeldLaunch) + uint64_t{depth} * sizeof(InFlight);
  }

  // `on_ended` learns, under the scheduler's mutex, the newest of the queue's
  // launches known to have ended (all before it ended too): it must be quick
  // and must not call back into the queue.
  ScheduledQueue(DeviceScheduler& scheduler, std::unique_ptr<Queue> queue, const void* tenant,
                 uint32_t weight, int32_t priority,
                 std::function<void(EventId)> on_ended = nullptr);
  ~ScheduledQueue() override;

  Device& device() const override { return queue_->device(); }
  absl::StatusOr<EventId> enqueue_kernel(CompiledKernel& kernel, const LaunchGeometry& geometry,
                                         const LaunchContext& context,
                                         std::span<const KernelArg> args) override;
  absl::Status write_buffer(Buffer& buffer, uint64_t offset,
                            std::span<const std::byte> data) override;
  absl::Status read_buffer(const Buffer& buffer, uint64_t offset,
                           std::span<std::byte> data) override;
  absl::Status write_buffer_pieces(Buffer& buffer, uint64_t offset,
                                   std::span<const std::span<const std::byte>> pieces) override;
  absl::Status wait(EventId event) override;
  absl::Status finish() override;

  // The direct path (server/README.md): the device's queue behind this one;
  // lending its channel (`lender`'s) to the worker, which may be done only
  // while every launch issued has ended with no failure left to report and
  // the device is not contended (FAILED_PRECONDITION saying which is not so;
  // DeviceScheduler::lend_locked); the loan's end, with `n`
  // launches that ran on the device's queue without this one, which take
  // the next ids, ended (`failed`: with what, reported by the next wait that
  // covers the last of them, as the first failure of a batch is).
  Queue& device_queue() const { return *queue_; }
  absl::Status lend(ChannelLoans::Lender& lender);
  void end_loan(uint64_t n, absl::Status failed);

  // Clients in a wait that sends the queue's granted launches themselves
  // (their launch has not gone to the device yet).
  uint32_t clients_dispatching() const {
    absl::MutexLock lock(&mu());
    return dispatching_waits_;
  }

 private:
  struct HeldLaunch {
    EventId event = 0;
    CompiledKernel* kernel = nullptr;
    LaunchGeometry geometry;
    LaunchContext context;
    uint32_t nargs = 0;
    std::array<KernelArg, kMaxKernelArgs> args;
    int64_t accepted_ns = 0;  // steady clock
  };
  struct InFlight {
    EventId event = 0;  // ours
    EventId device_event = 0;
    int64_t accepted_ns = 0;  // steady clock: when kad took the launch
  };

  absl::Mutex& mu() const ABSL_LOCK_RETURNED(scheduler_.mu()) { return scheduler_.mu(); }
  void pump();
  // Sends granted held launches to the device, in order.
  // A wait stops once `until` has gone (the pump goes on while any are granted).
  void dispatch_granted(EventId until = ~EventId{0}) ABSL_EXCLUSIVE_LOCKS_REQUIRED(scheduler_.mu());
  // Records a launch sent to the device.
  void sent_locked(EventId event, EventId device_event, int64_t accepted_ns)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(scheduler_.mu());
  // Our launches up to `event` ended: their slots come free.
  void ended_locked(EventId event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(scheduler_.mu());
  // Waits on the device for our `event` (which went to the device, or
  // failed to), then marks what ended.
  absl::Status wait_sent_locked(EventId event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(scheduler_.mu());
  // `held`: a held launch the driver refused at dispatch (named here), not a
  // failure the device reported at a wait.
  void note_error_locked(EventId event, absl::Status status, bool held)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(scheduler_.mu());

  DeviceScheduler& scheduler_;
  std::unique_ptr<Queue> queue_;
  const std::function<void(EventId)> on_ended_;
  std::unique_ptr<DeviceScheduler::Flow> flow_;
  // Taken before the scheduler's mutex by whoever sends launches to the
  // device (the caller, uncontended; the pump otherwise): one at a time, in order.
  absl::Mutex dispatch_mu_ ABSL_ACQUIRED_BEFORE(scheduler_.mu());
  // Held by whoever waits on the device (the pump, or a caller's wait), until
  // it has noted what it saw: taken without the scheduler's mutex.
  absl::Mutex wait_mu_ ABSL_ACQUIRED_BEFORE(scheduler_.mu());

  EventId issued_ ABSL_GUARDED_BY(scheduler_.mu()) = 0;      // the newest id handed out
  EventId dispatched_ ABSL_GUARDED_BY(scheduler_.mu()) = 0;  // the newest sent (or failed)
  EventId ended_ ABSL_GUARDED_BY(scheduler_.mu()) = 0;       // the newest known ended
  // Held launches: a ring of kHeldLaunches.
  std::unique_ptr<HeldLaunch[]> held_ ABSL_GUARDED_BY(scheduler_.mu());
  uint32_t held_first_ ABSL_GUARDED_BY(scheduler_.mu()) = 0;
  uint32_t held_count_ ABSL_GUARDED_BY(scheduler_.mu()) = 0;
  // Launches on the device: a ring as deep as the device's queue.
  std::unique_ptr<InFlight[]> in_flight_ ABSL_GUARDED_BY(scheduler_.mu());
  uint32_t in_flight_first_ ABSL_GUARDED_BY(scheduler_.mu()) = 0;
  uint32_t in_flight_count_ ABSL_GUARDED_BY(scheduler_.mu()) = 0;
  // The first failure no wait has reported yet: a held launch the driver
  // refused, or a failure the pump's wait saw.
  absl::Status error_ ABSL_GUARDED_BY(scheduler_.mu());
  EventId error_event_ ABSL_GUARDED_BY(scheduler_.mu()) = 0;
  bool stop_ ABSL_GUARDED_BY(scheduler_.mu()) = false;
  // Waits whose launch has not gone to the device yet: they send granted
  // launches, not the pump.
  uint32_t dispatching_waits_ ABSL_GUARDED_BY(scheduler_.mu()) = 0;
  // Waits on the device, and the latest event one of them waits for.
  uint32_t device_waits_ ABSL_GUARDED_BY(scheduler_.mu()) = 0;
  EventId device_wait_target_ ABSL_GUARDED_BY(scheduler_.mu()) = 0;
  // Whether a wait on the device sees the end of every launch of ours
  // there (it is the only one), so that the pump need not watch it.
  bool a_wait_watches_ends_locked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(scheduler_.mu()) {
    return device_waits_ > 0 && in_flight_count_ == 1 &&
           in_flight_[in_flight_first_].event <= device_wait_target_;
  }
  std::once_flag pump_started_;
  std::thread pump_;
};

}  // namespace kad::server
