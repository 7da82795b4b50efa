#include "server/scheduled_queue.h"

#include <algorithm>
#include <chrono>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"

namespace kad::server {

namespace {

// What a wait for `event` needs: it went to the device (or failed to), or
// launches of the queue were granted slots, for the wait to send. An id
// the driver refused on the direct path is issued again to the next launch
// (enqueue_kernel): till then, a wait for it waits for the launches before.
struct SentOrGranted {
  const EventId* dispatched;
  const EventId* issued;
  const bool* stop;
  const uint32_t* held;
  const DeviceScheduler::Flow* flow;
  EventId event;
  bool sent() const { return *dispatched >= std::min(event, *issued); }
  bool operator()() const { return sent() || *stop || (*held > 0 && flow->granted() > 0); }
};

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

ScheduledQueue::ScheduledQueue(DeviceScheduler& scheduler, std::unique_ptr<Queue> queue,
                               const void* tenant, uint32_t weight, int32_t priority,
                               std::function<void(EventId)> on_ended)
    : scheduler_(scheduler),
      queue_(std::move(queue)),
      on_ended_(std::move(on_ended)),
      flow_(scheduler.join(tenant, weight, priority)),
      held_(std::make_unique<HeldLaunch[]>(kHeldLaunches)),
      in_flight_(std::make_unique<InFlight[]>(scheduler.depth())) {}

ScheduledQueue::~ScheduledQueue() {
  {
    absl::MutexLock lock(&mu());
    stop_ = true;
  }
  if (pump_.joinable()) pump_.join();
}

absl::StatusOr<EventId> ScheduledQueue::enqueue_kernel(CompiledKernel& kernel,
                                                       const LaunchGeometry& geometry,
                                                       const LaunchContext& context,
                                                       std::span<const KernelArg> args) {
  if (args.size() > kMaxKernelArgs) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a launch has ", args.size(), " arguments, more than the maximum of ", kMaxKernelArgs));
  }
  // The pump starts with the queue's first launch: a queue that never
  // launches costs no thread.
  try {
    std::call_once(pump_started_, [this] { pump_ = std::thread([this] { pump(); }); });
  } catch (const std::system_error& e) {
    // No thread to be had (the process is at its limit): this launch is
    // refused, kad stays up, and the next launch tries again.
    return absl::ResourceExhaustedError(
        absl::StrCat("kad cannot start the thread this queue's launches need: ", e.what()));
  }
  const int64_t accepted = steady_ns();
  dispatch_mu_.Lock();
  mu().Lock();
  bool took = held_count_ == 0 && scheduler_.try_take_locked(*flow_);
  if (!took && held_count_ == 0 && in_flight_count_ > 0) {
    // At the depth: launches of ours may have ended with no one looking.
    // A look that does not wait (half of them, as the pump would wait
    // for), and their slots come free for this launch, or for a queue that
    // waits for one: a pipeline past the depth then goes on from this
    // thread, with no switch to the pump and back per launch.
    const InFlight& half =
        in_flight_[(in_flight_first_ + (in_flight_count_ - 1) / 2) % scheduler_.depth()];
    if (queue_->ended(half.device_event)) {
      ended_locked(half.event);
      took = scheduler_.try_take_locked(*flow_);
    }
  }
  if (took) {
    // Uncontended: straight to the device, from this thread.
    const EventId event = ++issued_;
    mu().Unlock();
    absl::StatusOr<EventId> sent = queue_->enqueue_kernel(kernel, geometry, context, args);
    mu().Lock();
    if (sent.ok()) {
      sent_locked(event, *sent, accepted);
      dispatched_ = event;
    } else {
      --issued_;  // no one else issued meanwhile: that takes dispatch_mu_
      scheduler_.give_back_locked(*flow_);
    }
    mu().Unlock();
    dispatch_mu_.Unlock();
    if (!sent.ok()) return sent.status();
    return event;
  }
  // The launch waits in kad for its turn; the pump sends it.
  dispatch_mu_.Unlock();
  mu().Await(absl::Condition(
      +[](ScheduledQueue* q) { return q->held_count_ < kHeldLaunches || q->stop_; }, this));
  if (stop_) {
    mu().Unlock();
    return absl::UnavailableError("the queue is closing: launch refused");
  }
  HeldLaunch& h = held_[(held_first_ + held_count_) % kHeldLaunches];
  const EventId event = ++issued_;
  h.event = event;
  h.kernel = &kernel;
  h.geometry = geometry;
  h.context = context;
  h.nargs = static_cast<uint32_t>(args.size());
  std::copy(args.begin(), args.end(), h.args.begin());
  h.accepted_ns = accepted;
  ++held_count_;
  scheduler_.hold_locked(*flow_);
  mu().Unlock();
  return event;
}

void ScheduledQueue::pump() {
  absl::MutexLock lock(&mu());
  const absl::Condition work(
      +[](ScheduledQueue* q) {
        return q->stop_ ||
               (q->held_count_ > 0 && q->flow_->granted() > 0 && q->dispatching_waits_ == 0) ||
               (q->in_flight_count_ > 0 && q->scheduler_.anyone_waits_locked() &&
                !q->a_wait_watches_ends_locked());
      },
      this);
  while (true) {
    if (held_count_ > flow_->granted()) {
      // Launches of ours wait: a higher class that kept them back may lapse
      // with nothing else happening on the device.
      if (!mu().AwaitWithTimeout(work, DeviceScheduler::kClassLinger)) {
        scheduler_.regrant_locked();
        continue;
      }
    } else {
      mu().Await(work);
    }
    if (stop_) return;
    if (held_count_ > 0 && flow_->granted() > 0 && dispatching_waits_ == 0) {
      dispatch_granted();
      continue;
    }
    if (in_flight_count_ == 0 || !scheduler_.anyone_waits_locked() || a_wait_watches_ends_locked())
      continue;
    // Someone waits for a slot: learn when ours end. With another queue
    // waiting, each launch's end frees a slot for it at once; with only our
    // own launches waiting, half of what is on the device at a time (fewer
    // wake-ups, and the device never runs dry).
    const uint32_t k = scheduler_.others_wait_locked(*flow_) ? 0 : (in_flight_count_ - 1) / 2;
    const EventId event = in_flight_[(in_flight_first_ + k) % scheduler_.depth()].event;
    absl::Status ended = wait_sent_locked(event);
    if (!ended.ok()) note_error_locked(event, std::move(ended), /*held=*/false);
  }
}

void ScheduledQueue::dispatch_granted(EventId until) {
  mu().Unlock();
  dispatch_mu_.Lock();
  mu().Lock();
  while (held_count_ > 0 && flow_->granted() > 0 && !stop_ && dispatched_ < until) {
    // The caller writes only past the held launches: this one stays as it is.
    const HeldLaunch& h = held_[held_first_];
    mu().Unlock();
    absl::StatusOr<EventId> sent = queue_->enqueue_kernel(
        *h.kernel, h.geometry, h.context, std::span<const KernelArg>(h.args.data(), h.nargs));
    mu().Lock();
    const EventId event = h.event;
    held_first_ = (held_first_ + 1) % kHeldLaunches;
    --held_count_;
    scheduler_.dispatched_locked(*flow_, sent.ok());
    if (sent.ok()) {
      sent_locked(event, *sent, h.accepted_ns);
    } else {
      note_error_locked(event, sent.status(), /*held=*/true);
    }
    dispatched_ = event;
  }
  dispatch_mu_.Unlock();
}

void ScheduledQueue::sent_locked(EventId event, EventId device_event, int64_t accepted_ns) {
  InFlight& f = in_flight_[(in_flight_first_ + in_flight_count_) % scheduler_.depth()];
  f.event = event;
  f.device_event = device_event;
  f.accepted_ns = accepted_ns;
  ++in_flight_count_;
}

void ScheduledQueue::ended_locked(EventId event) {
  uint32_t n = 0;
  DeviceScheduler::Measured measured;
  const int64_t now = in_flight_count_ > 0 ? steady_ns() : 0;
  while (in_flight_count_ > 0 && in_flight_[in_flight_first_].event <= event) {
    ++n;
    scheduler_.latency().record(now - in_flight_[in_flight_first_].accepted_ns);
    // The driver's timestamps: what the launch is charged to its tenant.
    if (std::optional<DeviceTimes> t =
            queue_->device_times(in_flight_[in_flight_first_].device_event)) {
      ++measured.launches;
      measured.ns += scheduler_.busy_time_locked(t->start_ns, t->end_ns);
    }
    in_flight_first_ = (in_flight_first_ + 1) % scheduler_.depth();
    --in_flight_count_;
  }
  scheduler_.release_locked(*flow_, n, measured);
  ended_ = std::max(ended_, event);
  if (on_ended_) on_ended_(ended_);
}

absl::Status ScheduledQueue::wait_sent_locked(EventId event) {
  // The newest of ours on the device at or before `event`; none when all
  // of those ended, or never reached the device.
  EventId device_event = 0;
  for (uint32_t i = in_flight_count_; i > 0; --i) {
    const InFlight& f = in_flight_[(in_flight_first_ + i - 1) % scheduler_.depth()];
    if (f.event <= event) {
      device_event = f.device_event;
      break;
    }
  }
  absl::Status status;
  if (device_event != 0) {
    // One wait on the device at a time, and what it saw noted before the
    // next: a failure the device reports once (a worker's lost launches)
    // reaches the pump or the caller, and the other then finds it noted.
    mu().Unlock();
    absl::MutexLock one_wait(&wait_mu_);
    status = queue_->wait(device_event);
    mu().Lock();
  }
  // Ended, or failed on the device: either way no longer on it.
  ended_locked(event);
  return status;
}

void ScheduledQueue::note_error_locked(EventId event, absl::Status status, bool held) {
  if (!error_.ok()) return;  // the first is what the next wait reports
  // What the device said of a launch it ran names it already; a held launch
  // the driver refused later is named here.
  error_ =
      held ? absl::Status(status.code(),
                          absl::StrCat("launch ", event, " on ", device().info().id,
                                       " (it waited in kad for the device): ", status.message()))
           : std::move(status);
  error_event_ = event;
}

absl::Status ScheduledQueue::lend(ChannelLoans::Lender& lender) {
  absl::MutexLock lock(&mu());
  if (issued_ != ended_ || dispatched_ != issued_ || held_count_ != 0 || in_flight_count_ != 0 ||
      !error_.ok())
    return absl::FailedPreconditionError("the queue has launches in progress");
  if (!scheduler_.lend_locked(*flow_, lender))
    return absl::FailedPreconditionError(
        "the device is contended (another tenant's launches, a queue per compute unit, or "
        "launches waiting for a slot)");
  return absl::OkStatus();
}

void ScheduledQueue::end_loan(uint64_t n, absl::Status failed) {
  absl::MutexLock lock(&mu());
  scheduler_.end_loan_locked(*flow_);
  issued_ += n;
  dispatched_ += n;
  ended_ += n;
  if (!failed.ok()) note_error_locked(issued_, std::move(failed), /*held=*/false);
}

absl::Status ScheduledQueue::wait(EventId event) {
  absl::MutexLock lock(&mu());
  if (absl::Status s = check_issued(event, issued_ + 1); !s.ok()) return s;
  // Until the launch has gone to the device, this thread sends what is
  // granted (in order, ours or earlier ones), as the pump would.
  const SentOrGranted sent{&dispatched_, &issued_, &stop_, &held_count_, flow_.get(), event};
  ++dispatching_waits_;
  for (;;) {
    mu().Await(absl::Condition(&sent));
    if (sent.sent() || stop_) break;
    dispatch_granted(event);
  }
  --dispatching_waits_;
  absl::Status status;
  if (event > ended_) {
    ++device_waits_;
    device_wait_target_ = std::max(device_wait_target_, event);
    status = wait_sent_locked(event);
    if (--device_waits_ == 0) device_wait_target_ = 0;
  }
  // The first failure is what a wait reports, once: one the pump saw (or a
  // held launch the driver refused) comes before what the device says now,
  // which may be the same failure again.
  if (!error_.ok() && error_event_ <= event) status = std::exchange(error_, {});
  return status;
}

absl::Status ScheduledQueue::finish() {
  EventId last;
  {
    absl::MutexLock lock(&mu());
    last = issued_;
  }
  return wait(last);
}

absl::Status ScheduledQueue::write_buffer(Buffer& buffer, uint64_t offset,
                                          std::span<const std::byte> data) {
  return write_buffer_pieces(buffer, offset, {&data, 1});
}

absl::Status ScheduledQueue::write_buffer_pieces(
    Buffer& buffer, uint64_t offset, std::span<const std::span<const std::byte>> pieces) {
  // After every launch before it: those waiting in kad included.
  if (absl::Status s = finish(); !s.ok()) return s;
  return queue_->write_buffer_pieces(buffer, offset, pieces);
}

absl::Status ScheduledQueue::read_buffer(const Buffer& buffer, uint64_t offset,
                                         std::span<std::byte> data) {
  if (absl::Status s = finish(); !s.ok()) return s;
  return queue_->read_buffer(buffer, offset, data);
}

}  // namespace kad::server
