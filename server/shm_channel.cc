#include "server/shm_channel.h"

#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <system_error>
#include <thread>

#include "absl/strings/str_format.h"
#include "core/driver_scope.h"
#include "kad/shm/v1/handshake.h"
#include "kad/shm/v1/ring.h"
#include "server/queue_dispatch.h"
#include "server/sealed_memfd.h"
#include "server/shm_decode.h"
#include "server/worker/isolated_device.h"
#include "server/worker/served_channel.h"
#include "spdlog/spdlog.h"

namespace kad::server {

using namespace shm::v1;

namespace {

// Channels whose client submitted within the channel thread's last wait
// (100 ms): each has two waiters, its client and kad's channel thread. All
// channels of this process share the machine's cores.
std::atomic<uint32_t> g_busy_channels{0};

uint32_t usable_cores() {
  static const uint32_t cores = [] {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
    return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }();
  return cores;
}

// Spinning pays only while every busy channel's two waiters can have a core
// each; past that, spinners keep the cores from those they wait for, and
// clients get them in uneven turns (ChannelHeader::sleep_at_once).
bool spinning_pays() {
  return g_busy_channels.load(std::memory_order_relaxed) * 2 <= usable_cores();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShmChannel>> ShmChannel::create(Engine& engine,
                                                               std::shared_ptr<Session> session,
                                                               uint64_t queue, int socket,
                                                               ShmOptions options) {
  absl::StatusOr<SessionSlot> slot = SessionSlot::take(
      session->channels, engine.limits().max_channels_per_session, "shared-memory channels",
      "--max-channels-per-session", session->tenant(), Quota::kChannels);
  if (!slot.ok()) return slot.status();  // the socket is still the caller's, to refuse with
  absl::StatusOr<Charge> memory = engine.charge_host_memory(kChannelBytes);
  if (!memory.ok()) return memory.status();
  std::unique_ptr<ShmChannel> c(new ShmChannel(engine, std::move(session), queue, socket, options));
  c->slot_.emplace(*std::move(slot));
  c->memory_charge_ = *std::move(memory);
  auto memfd = create_sealed_memfd("kad-shm-channel", kChannelBytes);
  if (!memfd.ok()) {
    c->socket_ = -1;  // still the caller's, to refuse with
    return memfd.status();
  }
  c->memfd_ = *memfd;
  void* p = mmap(nullptr, kChannelBytes, PROT_READ | PROT_WRITE, MAP_SHARED, c->memfd_, 0);
  if (p == MAP_FAILED) {
    c->socket_ = -1;  // still the caller's, to refuse with
    return absl::ResourceExhaustedError("cannot create the channel's shared memory");
  }
  c->memory_ = static_cast<uint8_t*>(p);
  ChannelRings::format(p);
  c->rings_.emplace(p);
  return c;
}

ShmChannel::~ShmChannel() {
  if (close_listener_ != 0) session_->remove_close_listener(close_listener_);
  stop_.store(true);
  if (memory_ != nullptr) futex_wake(&header().submit.tail);
  if (worker::QueueProgress* p = lent_progress_.load()) futex_wake(&p->loan_owner);
  if (thread_.joinable()) thread_.join();
  // Only now: a request that holds the queue back waits for the loan to end.
  if (engine_.limits().shm_direct) session_->loans.remove(this);
  // However long the client keeps its mapping (the header with it: why the
  // channel ended went on the socket too).
  release_memfd_memory(memfd_, kChannelBytes);
  if (memory_) munmap(memory_, kChannelBytes);
  if (memfd_ >= 0) close(memfd_);
  if (socket_ >= 0) close(socket_);
}

absl::Status ShmChannel::start() {
  // The channel ends with its session, as a Submit stream does.
  close_listener_ = session_->add_close_listener([this] {
    session_closed_.store(true);
    futex_wake(&header().submit.tail);
    if (worker::QueueProgress* p = lent_progress_.load()) futex_wake(&p->loan_owner);
  });
  if (engine_.limits().shm_direct) session_->loans.add(this, queue_);
  try {
    thread_ = std::thread([this] { run(); });
  } catch (const std::system_error& e) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("kad cannot start a thread for the channel: %s", e.what()));
  }
  return absl::OkStatus();
}

bool ShmChannel::client_gone() const {
  pollfd p{socket_, POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLHUP | POLLRDHUP | POLLERR)) != 0;
}

void ShmChannel::end(const std::string& reason) {
  rings_->end(reason);
  // And on the socket, the channel's last message: kad frees the header
  // with the rest of the channel's memory once it reaps the channel, at
  // once, so a client that looks only then reads zeros there. The message
  // waits in the client's socket, a few hundred bytes of the kernel's; a
  // page of kad's that the client's mapping kept would be memory any client
  // could pile up by ending channels.
  Reply last{};
  last.code = static_cast<int32_t>(absl::StatusCode::kUnavailable);
  std::memcpy(last.message, reason.data(), std::min(reason.size(), sizeof(last.message)));
  last.message_length = static_cast<uint32_t>(std::min(reason.size(), sizeof(last.message)));
  (void)send_reply(socket_, last, -1, /*wait=*/false);
  spdlog::warn("{}: shared-memory channel of queue {} ended: {}", session_->log_name(), queue_,
               reason);
}

void ShmChannel::set_busy(bool busy) {
  if (busy == busy_) return;
  busy_ = busy;
  if (busy)
    g_busy_channels.fetch_add(1, std::memory_order_relaxed);
  else
    g_busy_channels.fetch_sub(1, std::memory_order_relaxed);
}

bool ShmChannel::post() {
  const absl::Status posted =
      rings_->post(completion_.record(), absl::Milliseconds(options_.stall_timeout_ms), spin_,
                   [this] { return stop_.load() || client_gone(); });
  if (posted.ok()) return true;
  if (!absl::IsCancelled(posted)) end(std::string(posted.message()));
  return false;
}

bool ShmChannel::execute(const SubmitRecord& r) {
  CompletionRecord* done = &completion_.start(r.tag);
  // Decoded here; what the command does is run_queue_op's, shared with gRPC.
  absl::Status status;
  QueueOp op;
  std::byte* const arena = rings_->arena();
  switch (static_cast<Op>(r.op)) {
    case Op::kLaunch:
    case Op::kSubmit:
    case Op::kRun:
      op.kind = static_cast<Op>(r.op) == Op::kRun ? QueueOp::Kind::kRun : QueueOp::Kind::kLaunch;
      op.launch = &decoded_.request;
      status = decode_launch(r, queue_, &decoded_);
      break;
    case Op::kWait:
      op.kind = QueueOp::Kind::kWait;
      op.event = r.event;
      break;
    case Op::kCopyIn:
    case Op::kCopyOut:
      status = check_arena_range(r, kArenaBytes);
      if (!status.ok()) break;
      op.buffer = r.buffer;
      op.offset = r.offset;
      if (static_cast<Op>(r.op) == Op::kCopyIn) {
        op.kind = QueueOp::Kind::kCopyIn;
        op.in = std::span<const std::byte>(arena + r.arena_offset, r.size);
      } else {
        op.kind = QueueOp::Kind::kCopyOut;
        op.out = std::span<std::byte>(arena + r.arena_offset, r.size);
      }
      break;
    case Op::kPing:
      break;
    default:
      status = absl::InvalidArgumentError(absl::StrFormat(
          "record %d has operation %d, not launch, submit, run, wait, copy in, copy out or ping",
          r.tag, r.op));
  }
  QueueOpResult result;
  if (status.ok())
    status = run_queue_op(engine_, *session_, queue_, op, RequestCounters::Transport::kSharedMemory,
                          &result);
  const auto record_op = static_cast<Op>(r.op);
  launch_event_ =
      (record_op == Op::kRun || record_op == Op::kSubmit) && status.ok() ? result.launch.event : 0;
  waited_ = record_op == Op::kWait && status.ok();
  if (result.launched) {
    const LaunchResult& launched = result.launch;
    done->event = launched.event;
    done->linear = launched.choice.linear;
    done->index_bits = launched.choice.index_bits;
    done->rank = launched.choice.rank;
    done->workgroup_rank = static_cast<uint8_t>(launched.workgroup.rank);
    for (int d = 0; d < launched.workgroup.rank; ++d) done->workgroup[d] = launched.workgroup[d];
  }
  if (!status.ok()) engine_.requests().count_command(status.code());
  completion_.finish(status);
  // A submitted launch that was accepted has nothing to tell.
  return !(static_cast<Op>(r.op) == Op::kSubmit && status.ok());
}

bool ShmChannel::worker_may_serve(const SubmitRecord& r) {
  switch (static_cast<Op>(r.op)) {
    case Op::kPing:
    case Op::kWait:
    case Op::kCopyIn:
    case Op::kCopyOut:
      return true;
    default:
      return false;
  }
}

void ShmChannel::recall() {
  recall_asked_.store(true);
  worker::QueueProgress* p = lent_progress_.load();
  if (p == nullptr) return;
  p->loan_recall.store(1, std::memory_order_seq_cst);
  futex_wake(&header().submit.tail);  // the worker, asleep on the client's ring
  futex_wake(&p->loan_owner);         // this channel's thread
}

std::optional<LoanEnd> ShmChannel::reason_to_recall(const worker::QueueProgress& p) {
  if (session_closed_.load()) return LoanEnd::kSessionClosed;
  if (engine_.draining()) return LoanEnd::kDraining;
  if (session_->loans.held(queue_)) return LoanEnd::kHeld;
  if (client_gone()) return LoanEnd::kClientGone;
  // What is left that asks for it back: the device's scheduler.
  if (p.loan_recall.load() != 0 || recall_asked_.load()) return LoanEnd::kContention;
  return std::nullopt;
}

bool ShmChannel::consider_loan() {
  if (!engine_.limits().shm_direct) return false;
  if (launch_event_ != 0) {
    if (repeats_ > 0 && worker::same_plan(candidate_, record_)) {
      ++repeats_;
    } else {
      candidate_ = record_;
      repeats_ = 1;
    }
    planned_event_ = launch_event_;
    const CompletionRecord& done = completion_.record();
    candidate_choice_.linear = done.linear;
    candidate_choice_.index_bits = done.index_bits;
    candidate_choice_.rank = done.rank;
    candidate_choice_.workgroup_rank = done.workgroup_rank;
    std::memcpy(candidate_choice_.workgroup, done.workgroup, sizeof(done.workgroup));
    // A pipelined launch leaves the queue busy: lent at a wait.
    return static_cast<Op>(record_.op) == Op::kRun && lend();
  }
  if (waited_) return lend();
  // A loan is for a run of launches, with copies, waits and pings between
  // them: what the worker may serve.
  if (!worker_may_serve(record_)) repeats_ = 0;
  return false;
}

bool ShmChannel::lend() {
  if (repeats_ < loan_after_ || !session_->loans.begin_loan(this)) return false;
  repeats_ = 0;
  recall_asked_.store(false);
  absl::StatusOr<Engine::ChannelLoan> loan =
      engine_.lend_channel(*session_, queue_, planned_event_, candidate_, candidate_choice_, memfd_,
                           rings_->positions(), *this);
  if (!loan.ok()) {
    session_->loans.returned(this);
    if (loan.status().code() != absl::StatusCode::kFailedPrecondition) {
      spdlog::warn("{}: queue {}'s channel stays with kad: {}", session_->log_name(), queue_,
                   std::string(loan.status().message()));
    }
    return false;
  }
  if (!lent_before_) {
    lent_before_ = true;
    spdlog::info(
        "{}: queue {}'s shared-memory channel is lent to the session's worker "
        "(--shm-direct)",
        session_->log_name(), queue_);
    spdlog::default_logger()->flush();  // once per channel: seen at once where it goes
  }
  if (!serve_lent(*loan)) stop_.store(true);
  return true;
}

bool ShmChannel::serve_lent(const Engine::ChannelLoan& loan) {
  worker::QueueProgress& p = loan.page->progress();
  worker::IsolatedDevice& device = *loan.queue->owner;
  lent_progress_.store(&p);
  uint64_t counted = 0;                      // of the worker's launches, those in kad's counters
  uint64_t counted_in = 0, counted_out = 0;  // and of its copies' bytes
  auto count_copies = [&](uint64_t in, uint64_t out) {
    if (in > counted_in)
      engine_.requests().count_copied(RequestCounters::Transport::kSharedMemory, true,
                                      in - counted_in);
    if (out > counted_out)
      engine_.requests().count_copied(RequestCounters::Transport::kSharedMemory, false,
                                      out - counted_out);
    counted_in = std::max(counted_in, in);
    counted_out = std::max(counted_out, out);
  };
  bool recalled = false;
  absl::Time recalled_at;
  std::optional<LoanEnd> why;  // decided by kad: a recall, a deadline, kad stopping
  // The worker's progress (records taken and launches ended), as last
  // seen, and since when.
  uint64_t progress = ~uint64_t{0};
  absl::Time progress_since = absl::Now();
  for (bool first = true;; first = false) {
    // Woken by the worker's giving the channel back, or a recall.
    if (!first) futex_wait(&p.loan_owner, 1, 50'000'000);
    const worker::LoanView v = device.look_at_loan(*loan.device_queue);
    if (v.launches > counted) {
      engine_.count_lent_launches(loan, v.launches - counted);
      counted = v.launches;
    }
    count_copies(v.bytes_in, v.bytes_out);
    if (!v.lent) break;
    const absl::Time now = absl::Now();
    if (stop_.load()) {
      // kad stops: the worker goes with it, at once.
      device.expire_loan(*loan.device_queue, absl::UnavailableError("kad stops"));
      why = LoanEnd::kStopping;
      continue;
    }
    if (!recalled) {
      if (std::optional<LoanEnd> recall_for = reason_to_recall(p)) {
        recall();
        recalled = true;
        recalled_at = now;
        why = recall_for;
      }
    }
    // Busy while the client sends (the worker and the client then wait on
    // each other), and whether both may spin, as when kad serves.
    set_busy(v.records + v.ended != progress || v.running_launch);
    spin_ = spinning_pays();
    rings_->set_sleep_at_once(!spin_);
    if (v.records + v.ended != progress) {
      progress = v.records + v.ended;
      progress_since = now;
    }
    // The worker's launch, or its giving the channel back, past the deadline.
    if (v.running_launch && now - progress_since > v.launch_timeout) {
      device.expire_loan(*loan.device_queue,
                         absl::DeadlineExceededError("a launch ran past its deadline"));
      why = LoanEnd::kDeadline;
    } else if (recalled && !v.running_launch && now - recalled_at > v.launch_timeout) {
      device.expire_loan(*loan.device_queue,
                         absl::DeadlineExceededError("it did not give a lent channel back"));
      why = LoanEnd::kDeadline;
    }
  }
  const worker::LoanReturn r = device.end_loan(*loan.device_queue);
  // Ended by kad, or else by the worker: gone, or given back at a recall
  // this thread had not seen yet, or at a record it leaves to kad.
  if (!why) why = r.worker_lost ? LoanEnd::kWorkerLost : reason_to_recall(p);
  // A loan that came back after a few records cost more than it saved (a
  // round trip to the worker each way): the next waits for a longer run.
  loan_after_ = r.launches >= kShortLoan ? kLoanAfter : std::min(loan_after_ * 2, kLongestLoanWait);
  if (r.launches > counted) engine_.count_lent_launches(loan, r.launches - counted);
  count_copies(r.bytes_in, r.bytes_out);
  engine_.end_channel_loan(*session_, loan, r.launches, why.value_or(LoanEnd::kHandedBack));
  rings_.emplace(memory_, RingPositions{r.submit_head, r.completion_tail});
  lent_progress_.store(nullptr);
  bool ok = true;
  if (r.answering != worker::LoanTaking::kNone) {
    // The record the worker took and did not answer (it died meanwhile).
    CompletionRecord& done = completion_.start(r.tag);
    if (r.answering == worker::LoanTaking::kRun) done.event = loan.event_base + r.launches;
    if (!r.status.ok()) engine_.requests().count_command(r.status.code());
    completion_.finish(r.status);
    ok = post();
  }
  session_->loans.returned(this);
  return ok;
}

void ShmChannel::run() {
  t_kad_service_thread = true;
  pthread_setname_np(pthread_self(), "kad-shm");
  // The last wait ended with nothing to do: the next one sleeps at once. A
  // channel spins only while work comes; idle, each of its periodic
  // wake-ups would spin for nothing (48 idle channels: 0.16 of a core).
  bool idle = false;
  while (!stop_.load()) {
    if (session_closed_.load()) {
      end("the session this channel belongs to has closed");
      break;
    }
    // Both sides spin first only while the cores allow it; the client reads
    // what kad decided from the header (its own value there decides nothing here).
    spin_ = spinning_pays();
    rings_->set_sleep_at_once(!spin_);
    const absl::StatusOr<uint32_t> waiting = rings_->wait_for_records(100'000'000, spin_ && !idle);
    if (!waiting.ok()) {
      end(std::string(waiting.status().message()));
      break;
    }
    if (*waiting == 0) {
      idle = true;
      set_busy(false);
      if (client_gone()) break;
      continue;
    }
    idle = false;
    set_busy(true);
    bool ok = true;
    // A stop ends the batch too: a ring's worth of records is up to
    // kSubmitSlots launches, which a stopping kad need not run.
    for (uint32_t n = *waiting; n > 0 && ok && !stop_.load(std::memory_order_relaxed); --n) {
      rings_->take(&record_);
      if (execute(record_)) ok = post();
      if (ok && consider_loan()) break;  // the rings moved on meanwhile
    }
    if (!ok) break;
  }
  set_busy(false);
  finished_.store(true);
}

}  // namespace kad::server
