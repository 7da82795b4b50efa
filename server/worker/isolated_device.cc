#include "server/worker/isolated_device.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "core/kernel_lowering.h"
#include "core/tune.h"
#include "kad/shm/v1/ring.h"
#include "server/sealed_memfd.h"
#include "server/worker/program_build.h"
#include "server/worker/worker_codec.h"
#include "spdlog/spdlog.h"

namespace kad::server::worker {
namespace {

std::atomic<uint64_t> next_kernel_id{1};

std::span<const std::byte> bytes_of_string(const std::string& s) {
  return std::as_bytes(std::span<const char>(s.data(), s.size()));
}

}  // namespace

uint64_t WorkerKernel::launch_configuration(uint64_t nitems, uint64_t max_items) const {
  return spread_over_compute_units(limits_, compute_units_, nitems, max_items);
}

// Memory the daemon owns (a sealed memfd, mapped here), given to the worker
// by descriptor: it survives the worker.
class WorkerBuffer final : public Buffer {
 public:
  WorkerBuffer(IsolatedDevice& device, uint64_t bytes, std::byte* data, int fd, bool owns_mapping)
      : device_(device),
        host_(*device.host()),
        bytes_(bytes),
        data_(data),
        fd_(fd),
        owns_mapping_(owns_mapping) {}
  ~WorkerBuffer() override {
    {
      absl::MutexLock lock(&host_.mu_);
      host_.buffers_.erase(id_);
      if (host_.worker_ && id_ != 0) {
        IdRecord r{id_};
        (void)host_.worker_->send(Op::kFreeBuffer, bytes_of(r));
      }
    }
    if (owns_mapping_) {
      // The worker unmaps it when it reads kFreeBuffer; a worker its kernel
      // took over might not.
      release_memfd_memory(fd_, bytes_);
      munmap(data_, bytes_);
    }
    close(fd_);
  }
  uint64_t size() const override { return bytes_; }
  const Device& device() const override { return device_; }
  uint64_t id() const { return id_; }
  std::byte* data() const { return data_; }
  int fd() const { return fd_; }

 private:
  friend class WorkerHost;
  IsolatedDevice& device_;  // the session's
  WorkerHost& host_;        // the worker's, which the device outlives
  uint64_t id_ = 0;
  uint64_t bytes_;
  std::byte* data_;
  int fd_;
  bool owns_mapping_;
};

class WorkerQueue final : public Queue {
 public:
  WorkerQueue(IsolatedDevice& device, absl::Duration launch_timeout)
      : device_(device), host_(*device.host()), launch_timeout_(launch_timeout) {}
  ~WorkerQueue() override {
    absl::MutexLock lock(&host_.mu_);
    host_.queues_.erase(id_);
    if (host_.worker_ && id_ != 0) {
      IdRecord r{id_};
      (void)host_.worker_->send(Op::kReleaseQueue, bytes_of(r));
    }
  }
  Device& device() const override { return device_; }

  absl::StatusOr<EventId> enqueue_kernel(CompiledKernel& compiled, const LaunchGeometry& geometry,
                                         const LaunchContext& context,
                                         std::span<const KernelArg> args) override {
    // Every kernel compiled for this device's id came from a worker: a
    // WorkerKernel (the daemon compiles nothing for an isolated device).
    const auto& kernel = static_cast<const WorkerKernel&>(compiled);
    absl::MutexLock lock(&host_.mu_);
    if (absl::Status s = host_.ensure_worker(); !s.ok()) return s;
    if (!host_.loaded_.contains(kernel.id())) {
      if (absl::Status s = host_.load(kernel); !s.ok()) return s;
    }
    if (LaunchRing* ring = host_.worker_->launch_ring(); ring != nullptr) {
      ring->take_wide_wants([this](uint64_t id)
                                ABSL_NO_THREAD_SAFETY_ANALYSIS { host_.note_wide_want(id); });
    }
    if (!host_.wide_wanted_.empty()) {
      if (absl::Status s = host_.serve_wide_wants(kernel); !s.ok()) return s;
    }
    record_.queue = id_;
    record_.kernel = kernel.id();
    record_.geometry = geometry;
    record_.context = context;
    record_.nargs = static_cast<uint32_t>(args.size());
    for (size_t i = 0; i < args.size(); ++i) {
      const KernelArg& a = args[i];
      ArgRecord& out = record_.args[i];
      out.kind = static_cast<uint8_t>(a.kind);
      out.scalar = static_cast<uint8_t>(a.scalar);
      out.value = a.buffer != nullptr ? static_cast<const WorkerBuffer*>(a.buffer)->id() : a.bits;
      out.local_bytes = a.local_bytes;
    }
    const EventId event = next_;
    launched_[event % kRing] = {absl::Now(), &kernel};
    ++next_;
    const auto wire =
        std::as_bytes(std::span(reinterpret_cast<const char*>(&record_), record_.wire_size()));
    // By the launch ring where it has room, else by the socket.
    LaunchRing* ring = host_.worker_->launch_ring();
    absl::StatusOr<bool> written = ring != nullptr ? ring->try_write(wire) : false;
    absl::Status sent = written.status();
    if (written.ok() && *written) {
      ring->wake();
    } else if (written.ok()) {
      if (ring != nullptr) ring->note_socket_launch();
      sent = host_.worker_->send(Op::kLaunch, wire);
    }
    if (!sent.ok()) {
      host_.lose_worker(sent, nullptr);
      loss_pending_ = false;  // reported now
      return loss_;
    }
    return event;
  }

  absl::Status write_buffer(Buffer& buffer, uint64_t offset,
                            std::span<const std::byte> data) override {
    return write_buffer_pieces(buffer, offset, {&data, 1});
  }

  absl::Status write_buffer_pieces(Buffer& buffer, uint64_t offset,
                                   std::span<const std::span<const std::byte>> pieces) override {
    if (absl::Status s = check_transfer(*this, buffer, offset, size_of_pieces(pieces)); !s.ok())
      return s;
    if (absl::Status s = wait_for(latest()); !s.ok()) return s;
    // The daemon's own memory: no worker is needed to write it.
    copy_pieces(static_cast<WorkerBuffer&>(buffer).data() + offset, pieces);
    return absl::OkStatus();
  }

  absl::Status read_buffer(const Buffer& buffer, uint64_t offset,
                           std::span<std::byte> data) override {
    if (absl::Status s = check_transfer(*this, buffer, offset, data.size()); !s.ok()) return s;
    if (absl::Status s = wait_for(latest()); !s.ok()) return s;
    if (!data.empty()) {
      std::memcpy(data.data(), static_cast<const WorkerBuffer&>(buffer).data() + offset,
                  data.size());
    }
    return absl::OkStatus();
  }

  absl::Status wait(EventId event) override {
    if (absl::Status s = check_issued(event, latest() + 1); !s.ok()) return s;
    return wait_for(event);
  }

  absl::Status finish() override { return wait_for(latest()); }

  // ended() is left unanswered (false): past the device's depth, the
  // queue's launches then wait in kad and its pump sends them to the worker,
  // alongside the thread that accepts them; sending each from that thread
  // (measured) halved the pipelined rate through a worker.

  // What the worker's progress page reports ended (clamped to what it was
  // given): a tenant's launches in flight stop counting it.
  bool known_ended(EventId event) override {
    absl::MutexLock lock(&host_.mu_);
    return page_ != nullptr && event <= reported_ended();
  }

  // The direct path (IsolatedDevice::lend_channel and the rest).
  absl::StatusOr<std::shared_ptr<ProgressPage>> lend(int channel_fd, ServeChannelRecord* loan) {
    absl::MutexLock lock(&host_.mu_);
    if (loan_.active) return absl::FailedPreconditionError("the queue's channel is lent already");
    if (!host_.worker_ || page_ == nullptr || next_ == base_ + 1)
      return absl::FailedPreconditionError("no launch of the queue on this worker to plan from");
    observe(next_ - 1, /*ask_failure=*/false);
    if (!host_.worker_ || page_ == nullptr || std::max(confirmed_, base_) != next_ - 1 ||
        !failed_.ok() || loss_pending_ ||
        page_->progress().failed.load(std::memory_order_acquire) != 0)
      return absl::FailedPreconditionError("the queue has launches in progress");
    loan->queue = id_;
    std::memcpy(&loan->plan.launch, &record_, sizeof(record_));
    QueueProgress& p = page_->progress();
    p.loan_recall.store(0, std::memory_order_relaxed);
    p.loan_records.store(0, std::memory_order_relaxed);
    p.loan_launches.store(0, std::memory_order_relaxed);
    p.loan_bytes_in.store(0, std::memory_order_relaxed);
    p.loan_bytes_out.store(0, std::memory_order_relaxed);
    p.loan_answering.store(0, std::memory_order_relaxed);
    p.loan_submit_head.store(loan->submit_head, std::memory_order_relaxed);
    p.loan_completion_tail.store(loan->completion_tail, std::memory_order_relaxed);
    p.loan_owner.store(1, std::memory_order_seq_cst);
    std::shared_ptr<ProgressPage> page = page_;
    if (absl::Status s = host_.call(Op::kServeChannel, bytes_of(*loan), channel_fd,
                                    absl::Now() + absl::Seconds(5));
        !s.ok()) {
      page->progress().loan_owner.store(0, std::memory_order_relaxed);
      return s;
    }
    loan_.active = true;
    loan_.page = page;
    loan_.kernel = launched_[(next_ - 1) % kRing].kernel;
    return page;
  }

  LoanView look_at_loan() {
    absl::MutexLock lock(&host_.mu_);
    LoanView v;
    v.launch_timeout = launch_timeout_;
    if (loan_.active) host_.check_alive();  // a worker that hung up is lost: its loan ends
    if (!loan_.active) return v;
    const QueueProgress& p = loan_.page->progress();
    v.lent = p.loan_owner.load(std::memory_order_acquire) != 0;
    v.launches = p.loan_launches.load(std::memory_order_acquire);
    v.records = p.loan_records.load(std::memory_order_acquire);
    // The worker's launches before the loan had all ended; its count goes on from them.
    const uint64_t before = next_ - 1 - base_;
    const uint64_t completed = p.completed.load(std::memory_order_acquire);
    v.ended = std::min(completed > before ? completed - before : 0, v.launches);
    const uint32_t answering = p.loan_answering.load(std::memory_order_acquire);
    v.running_launch = v.ended < v.launches ||
                       answering == static_cast<uint32_t>(LoanTaking::kRun) ||
                       answering == static_cast<uint32_t>(LoanTaking::kWait);
    v.bytes_in = p.loan_bytes_in.load(std::memory_order_acquire);
    v.bytes_out = p.loan_bytes_out.load(std::memory_order_acquire);
    return v;
  }

  void expire_loan(const absl::Status& why) {
    absl::MutexLock lock(&host_.mu_);
    if (loan_.active && host_.worker_) host_.lose_worker(why, this);
  }

  LoanReturn end_loan() {
    absl::MutexLock lock(&host_.mu_);
    absorb_loan();
    LoanReturn r = loan_.returned;
    loan_.returned = {};
    loan_.page.reset();
    if (r.answering == LoanTaking::kWait) {
      // A wait for launches the worker took with it: they were lost.
      if (loss_pending_) {
        loss_pending_ = false;
        r.status = loss_;
      }
    } else if (r.answering == LoanTaking::kRun) {
      // The launch in progress: the worker is gone, and with it the launch.
      if (loss_pending_ && loss_from_ <= loan_.running && loan_.running <= loss_through_) {
        loss_pending_ = false;
        r.status = loss_;
      } else {
        r.status = absl::InternalError(
            absl::StrCat(host_.whose(), " gave the channel back without answering its launch"));
      }
    }
    return r;
  }

 private:
  friend class WorkerHost;
  static constexpr uint64_t kRing = 1024;
  // How often a wait that sleeps looks whether its worker is still there.
  static constexpr absl::Duration kAliveCheck = absl::Milliseconds(20);
  struct Launched {
    absl::Time submitted;
    const WorkerKernel* kernel = nullptr;
  };

  EventId latest() {
    absl::MutexLock lock(&host_.mu_);
    return next_ - 1;
  }

  // Waits for `event` and everything before it, each launch within its
  // deadline. The worker reports every launch's end on the queue's
  // progress page; the wait sleeps there without holding the device's
  // lock, so the session's other queues go on meanwhile.
  absl::Status wait_for(EventId event) {
    absl::MutexLock lock(&host_.mu_);
    for (;;) {
      // Launches a dead worker took with it are reported once, to the first
      // wait or copy that covers them (as a launch's error is reported by the
      // next wait); after that they count as ended.
      if (loss_pending_ && event >= loss_from_) {
        loss_pending_ = false;
        return loss_;
      }
      if (!failed_.ok()) {  // a launch's failure found by an earlier look
        absl::Status failed = std::move(failed_);
        failed_ = absl::OkStatus();
        return failed;
      }
      if (event <= std::max(confirmed_, base_)) return absl::OkStatus();
      if (!host_.worker_ || page_ == nullptr)
        return absl::UnavailableError(absl::StrCat(host_.whose(), " is gone"));
      const uint32_t seen = page_->progress().changes.load(std::memory_order_acquire);
      observe(event);
      // A failure is reported above first; a worker lost is reported too.
      if (event <= confirmed_ || !host_.worker_ || page_ == nullptr) continue;
      const absl::Time deadline = running_deadline();
      const absl::Time now = absl::Now();
      if (now >= deadline) {
        host_.lose_worker(absl::DeadlineExceededError("a launch ran past its deadline"), this);
        continue;  // the loss is reported above
      }
      // Asleep without the lock; the page stays mapped while this holds it.
      std::shared_ptr<ProgressPage> page = page_;
      const uint64_t generation = host_.generation_;
      // What the worker must report, at least, for a launch more to end.
      const uint64_t ended_so_far = std::max(confirmed_, base_) - base_;
      host_.mu_.Unlock();
      page->sleep_while_unchanged(seen, std::min(deadline - now, kAliveCheck));
      // The page changed and no launch more ended: a worker that only bumps
      // the word, or moves its count about below what kad has confirmed,
      // must not make this thread spin.
      if (page->progress().completed.load(std::memory_order_acquire) <= ended_so_far &&
          page->progress().changes.load(std::memory_order_acquire) != seen)
        absl::SleepFor(absl::Milliseconds(1));
      host_.mu_.Lock();
      // Nothing new, and the same worker: is it still there?
      if (host_.generation_ == generation &&
          page->progress().changes.load(std::memory_order_acquire) == seen)
        host_.check_alive();
    }
  }

  // Reads the progress page: what the worker reports as ended (no more than
  // it was given) becomes confirmed, now. A failure reported among launches
  // up to `event` is asked of the worker and kept in failed_, unless
  // `ask_failure` is false: the watchdog only reads progress, and leaves the
  // question (a round trip a worker may take seconds to answer) to waits.
  void observe(EventId event, bool ask_failure = true) ABSL_EXCLUSIVE_LOCKS_REQUIRED(host_.mu_) {
    QueueProgress& progress = page_->progress();
    const EventId ended = reported_ended();
    if (ended > confirmed_) {
      confirmed_ = ended;
      confirmed_at_ = absl::Now();
    }
    if (!ask_failure || progress.failed.load(std::memory_order_acquire) == 0 || event > confirmed_)
      return;
    // The worker answers at once: the launches ended, and it keeps the
    // first failure among them.
    WaitRecord w{id_, std::min(event, confirmed_) - base_};
    absl::Status sent = host_.worker_->send(Op::kWait, bytes_of(w));
    absl::Status reported_failure;
    absl::Status transport =
        sent.ok() ? host_.read_answer(absl::Now() + absl::Seconds(5), &reported_failure) : sent;
    if (!transport.ok()) {
      host_.lose_worker(transport, nullptr);  // the loss is pending now, for the caller
      return;
    }
    failed_ = std::move(reported_failure);
  }

  // The last launch the page reports ended, read once and clamped to the
  // launches this worker was given: the worker's word is not trusted.
  EventId reported_ended() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(host_.mu_) {
    const uint64_t reported = page_->progress().completed.load(std::memory_order_acquire);
    return base_ + std::min<uint64_t>(reported, next_ - 1 - base_);
  }

  // When the oldest launch not known ended must end: its deadline counts
  // from its submission or the end of the launch before it, whichever came
  // later, as the progress page showed them.
  absl::Time running_deadline() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(host_.mu_) {
    const EventId first = std::max(confirmed_, base_) + 1;
    const EventId oldest = next_ > kRing ? std::max(first, next_ - kRing) : first;
    return std::max(launched_[oldest % kRing].submitted, confirmed_at_) + launch_timeout_;
  }

  // Whether a launch of the queue is on the worker, not known to have ended.
  bool running() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(host_.mu_) {
    return host_.worker_ && page_ != nullptr && std::max(confirmed_, base_) + 1 < next_;
  }

  // The watchdog's look, for launches nobody waits for: progress is read
  // from the page; the oldest launch not ended, past its deadline, ends
  // the worker. What it finds waits for the client's next wait.
  void check_deadline() ABSL_EXCLUSIVE_LOCKS_REQUIRED(host_.mu_) {
    if (!host_.worker_ || page_ == nullptr) return;
    const EventId first = std::max(confirmed_, base_) + 1;
    if (first >= next_) return;
    observe(first, /*ask_failure=*/false);  // one watchdog serves every session
    if (std::max(confirmed_, base_) + 1 >= next_ || !host_.worker_) return;
    if (absl::Now() < running_deadline()) return;
    host_.lose_worker(absl::DeadlineExceededError("a launch ran past its deadline"), this);
  }

  // The loan's launches become the queue's, counted as sent to the worker
  // now, with the plan's kernel (for what a loss reports); once, when the
  // loan ends (given back, taken back, or lost with its worker).
  void absorb_loan(bool lost = false) ABSL_EXCLUSIVE_LOCKS_REQUIRED(host_.mu_) {
    if (!loan_.active) return;
    loan_.active = false;
    QueueProgress& p = loan_.page->progress();
    LoanReturn& r = loan_.returned;
    r = {};
    r.worker_lost = lost;
    // The worker's words, each read once; a count past any the channel
    // could hold is its own session's loss, never kad's.
    r.launches = std::min<uint64_t>(p.loan_launches.load(std::memory_order_acquire), 1u << 30);
    r.submit_head = p.loan_submit_head.load(std::memory_order_acquire);
    r.completion_tail = p.loan_completion_tail.load(std::memory_order_acquire);
    r.answering =
        static_cast<LoanTaking>(std::min<uint32_t>(p.loan_answering.load(std::memory_order_acquire),
                                                   static_cast<uint32_t>(LoanTaking::kWait)));
    r.tag = p.loan_tag.load(std::memory_order_acquire);
    r.bytes_in = p.loan_bytes_in.load(std::memory_order_acquire);
    r.bytes_out = p.loan_bytes_out.load(std::memory_order_acquire);
    const bool launch = r.answering == LoanTaking::kRun || r.answering == LoanTaking::kSubmit;
    if (r.answering != LoanTaking::kNone &&
        r.submit_head == p.loan_taking.load(std::memory_order_acquire)) {
      // Not taken after all: the record is kad's to serve, and a launch
      // counted for it never was one.
      if (launch && r.launches > 0) --r.launches;
      r.answering = LoanTaking::kNone;
    }
    // A submit is answered by no record; its loss, if any, by the next wait.
    if (r.answering == LoanTaking::kSubmit || (launch && r.launches == 0))
      r.answering = LoanTaking::kNone;
    const absl::Time now = absl::Now();
    const EventId from = next_ + (r.launches > kRing ? r.launches - kRing : 0);
    next_ += r.launches;
    for (EventId e = from; e < next_; ++e) launched_[e % kRing] = {now, loan_.kernel};
    loan_.running = next_ - 1;
    p.loan_owner.store(0, std::memory_order_seq_cst);
    shm::v1::futex_wake(&p.loan_owner);  // the channel's thread, should it sleep there
  }

  IsolatedDevice& device_;  // the session's
  WorkerHost& host_;        // the worker's, which the device outlives
  const absl::Duration launch_timeout_;
  absl::Status failed_;  // guarded by host_.mu_
  // Guarded by host_.mu_: where the worker now running reports this
  // queue's progress (null while no worker has the queue).
  std::shared_ptr<ProgressPage> page_;
  uint64_t id_ = 0;
  // Guarded by host_.mu_. Events count this queue's launches from 1, over
  // every worker the queue has had; the worker counts from `base_`.
  EventId next_ = 1;
  EventId base_ = 0;       // launches given to workers that are gone
  EventId confirmed_ = 0;  // known complete
  absl::Time confirmed_at_ = absl::InfinitePast();
  absl::Status loss_;  // why launches loss_from_..loss_through_ were lost
  EventId loss_from_ = 0, loss_through_ = 0;
  bool loss_pending_ = false;
  std::array<Launched, kRing> launched_{};
  LaunchRecord record_;
  // Guarded by host_.mu_: the queue's channel, lent to the worker.
  struct Loan {
    bool active = false;
    std::shared_ptr<ProgressPage> page;    // the worker's, when lent
    const WorkerKernel* kernel = nullptr;  // the plan's
    EventId running = 0;                   // the last launch absorbed
    LoanReturn returned;                   // what absorb_loan found
  } loan_;
};

WorkerHost::~WorkerHost() {
  absl::MutexLock lock(&mu_);
  running_pid_.store(0);
  // Killed already when its session closed; otherwise it may end cleanly.
  if (worker_) worker_->finish(absl::Milliseconds(500));
  const bool had_worker = worker_ != nullptr;
  worker_.reset();
  if (had_worker && share_.groups != nullptr) share_.groups->reweigh();
}

const char* WorkerHost::whose() const {
  return scope_ == WorkerScope::kSession ? "the session's worker" : "the device's worker";
}

const char* WorkerHost::shared_by_sessions() const {
  return scope_ == WorkerScope::kSession ? "" : ", which runs every session's kernels there,";
}

void WorkerHost::stop_worker() {
  // Not under mu_: a wait may hold it until its deadline. lose_worker
  // clears the pid before it reaps, so it names the worker here (but for a
  // window of a few instructions).
  closing_.store(true);
  const pid_t pid = running_pid_.load();
  if (pid <= 0) return;
  kill(-pid, SIGKILL);
  kill(pid, SIGKILL);
}

void WorkerHost::check_deadlines() {
  if (!mu_.TryLock()) return;  // a request in progress keeps the deadline itself
  for (auto& [id, q] : queues_) q->check_deadline();
  mu_.Unlock();
}

absl::Status WorkerHost::read_answer(absl::Time deadline, absl::Status* reported, uint32_t* flags) {
  const absl::Duration usual = std::max(deadline - absl::Now(), absl::ZeroDuration());
  for (;;) {
    WorkerQueue* due = nullptr;  // the launch in progress whose deadline comes first
    absl::Time until = deadline;
    if (pool_.options().kernels_hold_requests) {
      for (auto& [id, q] : queues_) {
        if (!q->running()) continue;
        if (const absl::Time d = q->running_deadline(); due == nullptr || d < until) {
          due = q;
          until = d;
        }
      }
      // None in progress (any more): the worker answers as a free one does.
      if (due == nullptr) until = std::max(deadline, absl::Now() + usual);
    }
    absl::Status s = worker_->read_status(until, reported, flags);
    if (due == nullptr || s.code() != absl::StatusCode::kDeadlineExceeded) return s;
    due->check_deadline();  // past it still (no progress since): the worker goes
    if (!worker_) {
      return absl::DeadlineExceededError(
          "a launch of the session ran past its deadline while the request waited for it");
    }
  }
}

absl::Status WorkerHost::call(Op op, std::span<const std::byte> a, int fd, absl::Time deadline) {
  absl::Status reported;
  const pid_t pid = worker_->pid();  // read_answer may have lost it
  absl::Status transport = worker_->send(op, a, {}, fd);
  if (transport.ok()) transport = read_answer(deadline, &reported);
  if (!transport.ok()) {
    lose_worker(transport, nullptr);
    return absl::UnavailableError(absl::StrFormat("%s (pid %d) on %s failed: %s", whose(), pid,
                                                  info().id, transport.message()));
  }
  return reported;
}

absl::Status WorkerHost::ensure_worker() {
  if (worker_) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<WorkerProcess>> w = pool_.take(info().id, owner_);
  if (!w.ok()) return w.status();
  worker_ = *std::move(w);
  running_pid_.store(worker_->pid());
  // The tenant's share of the CPU: a worker that cannot be given it runs
  // at the default, said once per worker.
  // A spare may be in the tenant's group already (the default tenant's).
  if (share_.groups != nullptr && worker_->cpu_group != share_.tenant) {
    if (absl::Status s = share_.groups->place(worker_->pid(), share_.tenant, share_.weight,
                                              share_.higher_classes);
        !s.ok()) {
      spdlog::warn("worker {}: {}", worker_->pid(), std::string(s.message()));
    } else {
      worker_->cpu_group = share_.tenant;
    }
  }
  if (share_.nice > 0) {
    if (absl::Status s = worker_->set_nice(share_.nice); !s.ok())
      spdlog::warn("{}", std::string(s.message()));
  }
  // A spare comes with the device's recently used kernels already loaded.
  loaded_ = std::move(worker_->preloaded);
  worker_->preloaded.clear();
  // Room for the kernels' wide builds the worker asks for: made now, so
  // that a launch that hands one over allocates nothing in kad.
  wide_wanted_.reserve(kWideTables);
  wide_given_.reserve(kWideTables);
  // A new worker (after a crash) gets the buffers and queues again: the
  // session's, or every session's that shares it.
  const absl::Time deadline = absl::Now() + pool_.options().start_timeout;
  for (const auto& [id, b] : buffers_) {
    ImportRecord r{id, b->size()};
    if (absl::Status s = call(Op::kImportBuffer, bytes_of(r), b->fd(), deadline); !s.ok()) return s;
  }
  for (const auto& [id, q] : queues_) {
    if (absl::Status s = give_queue(*q, deadline); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status WorkerHost::give_queue(WorkerQueue& queue, absl::Time deadline) {
  absl::StatusOr<std::shared_ptr<ProgressPage>> page = ProgressPage::create();
  if (!page.ok()) return page.status();
  IdRecord r{queue.id_};
  if (absl::Status s = call(Op::kCreateQueue, bytes_of(r), (*page)->fd(), deadline); !s.ok())
    return s;
  queue.page_ = *std::move(page);
  return absl::OkStatus();
}

void WorkerHost::check_alive() {
  // Every request reads its answer under mu_: with mu_ held, anything to
  // read on the connection means the worker hung up (or misbehaves).
  if (!worker_) return;
  pollfd p{worker_->socket_fd(), POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) > 0 && p.revents != 0)
    lose_worker(absl::UnavailableError("its connection closed"), nullptr);
}

void WorkerHost::lose_worker(const absl::Status& why, const WorkerQueue* deadline_queue,
                             bool stop) {
  if (!worker_) return;
  const pid_t pid = worker_->pid();
  const bool deadline = deadline_queue != nullptr || stop;
  // Reaped below: from now on its pid may name another process.
  running_pid_.store(0);
  const std::string ended = deadline ? worker_->stop() : worker_->reap();
  ++generation_;
  // A lent channel's launches are the queue's: lost with the rest.
  for (auto& [id, q] : queues_) q->absorb_loan(/*lost=*/true);
  // The launch whose fault ended the worker, where a queue's page names one
  // in progress there (fault_witness.h); read before the pages go.
  const WorkerQueue* culprit = nullptr;
  EventId culprit_launch = 0;
  std::string culprit_kernel;
  if (!deadline) {
    for (auto& [id, q] : queues_) {
      if (q->page_ == nullptr) continue;
      const uint64_t faulted = q->page_->progress().faulted.load(std::memory_order_acquire);
      const EventId first = std::max(std::max(q->confirmed_, q->base_), q->reported_ended()) + 1;
      if (faulted == 0 || faulted > q->next_ - 1 - q->base_ || q->base_ + faulted < first) continue;
      culprit = q;
      culprit_launch = q->base_ + faulted;
      const WorkerQueue::Launched& l = q->launched_[culprit_launch % WorkerQueue::kRing];
      culprit_kernel = l.kernel != nullptr ? l.kernel->entry() : "?";
      break;
    }
  }
  for (auto& [id, q] : queues_) {
    // What the worker reported ended before it went is not lost.
    if (q->page_ != nullptr) {
      q->confirmed_ = std::max(q->confirmed_, q->reported_ended());
      q->page_->wake_all();  // its sleepers look again, and find the loss
      q->page_ = nullptr;
    }
    const EventId last = q->next_ - 1;
    const EventId first = std::max(q->confirmed_, q->base_) + 1;
    q->base_ = last;
    if (first > last) continue;
    const WorkerQueue::Launched& running = q->launched_[first % WorkerQueue::kRing];
    const std::string kernel = running.kernel != nullptr ? running.kernel->entry() : "?";
    const std::string lost = first == last ? absl::StrFormat("launch %d was lost", first)
                                           : absl::StrFormat("%d launches were lost (%d to %d)",
                                                             last - first + 1, first, last);
    if (q == deadline_queue) {
      q->loss_ = absl::DeadlineExceededError(absl::StrFormat(
          "kernel `%s` (launch %d) ran past the launch deadline of %s: kad stopped %s (pid %d) "
          "on %s; %s",
          kernel, first, absl::FormatDuration(q->launch_timeout_), whose(), pid, info().id, lost));
    } else if (deadline_queue != nullptr) {
      q->loss_ = absl::AbortedError(absl::StrFormat(
          "%s (pid %d) on %s was stopped for a launch past its deadline on another queue; %s, "
          "the first of them kernel `%s`",
          whose(), pid, info().id, lost, kernel));
    } else if (stop) {
      q->loss_ = absl::AbortedError(
          absl::StrFormat("%s (pid %d) on %s was stopped (%s); %s, the first of them kernel `%s`",
                          whose(), pid, info().id, why.message(), lost, kernel));
    } else if (culprit == q) {
      q->loss_ = absl::AbortedError(absl::StrFormat(
          "%s (pid %d) on %s%s %s while running kernel `%s` (launch %d) of this queue; %s", whose(),
          pid, info().id, shared_by_sessions(), ended, culprit_kernel, culprit_launch, lost));
    } else if (culprit != nullptr && &culprit->device_ == &q->device_) {
      q->loss_ = absl::AbortedError(absl::StrFormat(
          "%s (pid %d) on %s%s %s while running kernel `%s` (launch %d) of another of the "
          "session's queues; %s, the first of them kernel `%s`",
          whose(), pid, info().id, shared_by_sessions(), ended, culprit_kernel, culprit_launch,
          lost, kernel));
    } else if (culprit != nullptr) {
      // Another session's kernel: not named to this one.
      q->loss_ = absl::AbortedError(absl::StrFormat(
          "%s (pid %d) on %s%s %s while running another session's kernel; %s, the first of them "
          "kernel `%s`",
          whose(), pid, info().id, shared_by_sessions(), ended, lost, kernel));
    } else if (scope_ == WorkerScope::kDevice) {
      // Any session's kernel may have ended it: none is named as the cause.
      q->loss_ = absl::AbortedError(absl::StrFormat(
          "the device's worker (pid %d) on %s, which runs every session's kernels there, %s; %s, "
          "the first of them kernel `%s`",
          pid, info().id, ended, lost, kernel));
    } else {
      q->loss_ = absl::AbortedError(absl::StrFormat(
          "the session's worker (pid %d) on %s %s while running kernel `%s` (launch %d); %s", pid,
          info().id, ended, kernel, first, lost));
    }
    q->loss_from_ = first;
    q->loss_through_ = last;
    q->loss_pending_ = true;
  }
  if (!closing_.load()) {  // a closing session's worker is killed on purpose
    spdlog::warn("{} (pid {}) on {} {}{} ({})",
                 scope_ == WorkerScope::kSession ? "a session's worker" : "the device's worker",
                 pid, info().id, ended,
                 culprit != nullptr
                     ? absl::StrFormat(" while running kernel `%s` (launch %d of its queue)",
                                       culprit_kernel, culprit_launch)
                     : std::string(),
                 std::string(why.message()));
    pool_.note_lost(deadline);
  }
  running_pid_.store(0);
  worker_.reset();
  loaded_.clear();
  wide_wanted_.clear();
  wide_given_.clear();
  if (share_.groups != nullptr) share_.groups->reweigh();
}

absl::Status WorkerHost::load(const WorkerKernel& kernel) {
  IdRecord r{kernel.id()};
  absl::Status reported;
  uint32_t flags = 0;
  const pid_t pid = worker_->pid();  // read_answer may have lost it
  absl::Status transport =
      worker_->send(Op::kLoadKernel, bytes_of(r), bytes_of_string(*kernel.request()));
  if (transport.ok()) {
    transport = read_answer(absl::Now() + pool_.options().compile_timeout, &reported, &flags);
  }
  if (!transport.ok()) {
    lose_worker(transport, nullptr);
    return absl::AbortedError(
        absl::StrFormat("loading kernel `%s` into %s (pid %d) on %s failed: %s", kernel.entry(),
                        whose(), pid, info().id, transport.message()));
  }
  if (reported.ok()) {
    loaded_.insert(kernel.id());
    pool_.remember(info().id, owner_, kernel.id(), kernel.request());
    pool_.note_load((flags & kLoadedProgramBinary) != 0);
  }
  return reported;
}

void WorkerHost::note_wide_want(uint64_t id) {
  // The worker's word: only a kernel it holds, asked for once.
  if (!loaded_.contains(id) || wide_given_.contains(id)) return;
  wide_wanted_.try_emplace(id, nullptr);
}

absl::Status WorkerHost::serve_wide_wants(const WorkerKernel& kernel) {
  if (auto asked = wide_wanted_.find(kernel.id());
      asked != wide_wanted_.end() && asked->second == nullptr) {
    if (kernel.wide_key().empty()) {  // none to be had: it stays narrow
      auto none = std::make_shared<WideBuilds::Build>();
      none->entry = kernel.entry();
      none->done.store(true);
      asked->second = std::move(none);
    } else {
      asked->second =
          pool_.wide_builds().want(shared_, kernel.wide_key(), kernel.entry(), kernel.request());
    }
  }
  for (auto it = wide_wanted_.begin(); it != wide_wanted_.end();) {
    const std::shared_ptr<const WideBuilds::Build> build = it->second;
    if (build == nullptr || !build->done.load(std::memory_order_acquire)) {
      ++it;
      continue;
    }
    const uint64_t id = it->first;
    wide_wanted_.erase(it++);
    wide_given_.insert(id);
    // Sent whether or not there is one: without, the kernel stays narrow
    // and the worker asks no more.
    const IdRecord r{id};
    const std::string empty;
    const std::string& binary = build->binary.ok() ? *build->binary : empty;
    absl::Status reported;
    const pid_t pid = worker_->pid();  // read_answer may have lost it
    absl::Status transport = worker_->send(Op::kLoadWide, bytes_of(r), bytes_of_string(binary));
    if (transport.ok())
      transport = read_answer(absl::Now() + pool_.options().compile_timeout, &reported);
    if (!transport.ok()) {
      lose_worker(transport, nullptr);
      return absl::AbortedError(absl::StrFormat(
          "giving kernel `%s`'s build for every core to %s (pid %d) on %s failed: %s", build->entry,
          whose(), pid, info().id, transport.message()));
    }
    if (build->binary.ok() && reported.ok()) pool_.wide_builds().note_given();
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CompiledKernel>> IsolatedDevice::compile(
    const CompileRequest& request) {
  // Lowered here, by the daemon's tools, into the code cache the workers
  // may only read. No lock of the session's is held: a compile takes
  // seconds, and the session's queues go on meanwhile.
  WorkerPool& pool_ = host_->pool_;
  absl::StatusOr<wire::Compile> lowered = compile_message(shared_, request);
  if (!lowered.ok()) return lowered.status();
  wire::Compile& message = *lowered;
  absl::StatusOr<wire::CompileReply> built = build_program(
      pool_, info(), program_binary_key(info(), pool_.options().build_variant, request),
      Op::kCompile, request.signature.entry, message.SerializeAsString());
  if (!built.ok()) return built.status();
  absl::StatusOr<CompiledKernelInfo> compiled = from_reply(*built);
  if (!compiled.ok()) return compiled.status();
  // Every worker loads the kernel from its program binary (or, on a device
  // that keeps none, compiles it from the request).
  if (!built->program_binary().empty()) {
    message.set_program_binary(std::move(*built->mutable_program_binary()));
    message.clear_lowered();  // loaded, not compiled: not needed
  }
  auto serialized = std::make_unique<std::string>(message.SerializeAsString());
  message.Clear();
  // A client can make a program binary of tens of MiB in a fraction of a
  // second (a large constant array): kad keeps it only within its guard.
  std::shared_ptr<void> charge;
  if (pool_.options().charge_host_memory) {
    absl::StatusOr<std::shared_ptr<void>> taken =
        pool_.options().charge_host_memory(serialized->size());
    if (!taken.ok()) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "kernel `%s` on %s: kad cannot keep its program binary (%d bytes) to load into "
          "workers: %s",
          request.signature.entry, info().id, serialized->size(), taken.status().message()));
    }
    charge = *std::move(taken);
  }
  const uint64_t id = next_kernel_id.fetch_add(1);
  // The charge goes with the bytes, not with the control block, which the
  // pool's weak references to recent kernels keep alive.
  std::shared_ptr<const std::string> shared(
      serialized.release(), [charge = std::move(charge)](const std::string* s) mutable {
        delete s;
        charge.reset();
      });
  pool_.remember(info().id, host_->owner_, id, shared);
  return std::make_unique<WorkerKernel>(
      id, request.signature.entry, compiled->limits, std::move(compiled->parameters),
      info().limits.compute_units, std::move(shared),
      pool_.options().wide_device ? program_binary_key(info(), kWideBuildVariant, request) : "");
}

absl::StatusOr<std::unique_ptr<Buffer>> WorkerHost::add_buffer(
    std::unique_ptr<WorkerBuffer> buffer) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = ensure_worker(); !s.ok()) return s;
  buffer->id_ = next_id_++;
  ImportRecord r{buffer->id_, buffer->size()};
  if (absl::Status s = call(Op::kImportBuffer, bytes_of(r), buffer->fd(),
                            absl::Now() + pool_.options().start_timeout);
      !s.ok()) {
    buffer->id_ = 0;  // the worker never had it
    return s;
  }
  buffers_[buffer->id_] = buffer.get();
  return std::unique_ptr<Buffer>(std::move(buffer));
}

absl::StatusOr<std::unique_ptr<Buffer>> IsolatedDevice::allocate(uint64_t bytes) {
  if (absl::Status s = check_allocation(info(), bytes); !s.ok()) return s;
  absl::StatusOr<int> fd = create_sealed_memfd("kad-buffer", bytes);
  if (!fd.ok()) return fd.status();
  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
  if (data == MAP_FAILED) {
    close(*fd);
    return absl::ResourceExhaustedError(absl::StrFormat("cannot map %d bytes", bytes));
  }
  return host_->add_buffer(std::make_unique<WorkerBuffer>(
      *this, bytes, static_cast<std::byte*>(data), *fd, /*owns_mapping=*/true));
}

absl::StatusOr<std::unique_ptr<Buffer>> IsolatedDevice::import_host_memory(
    const HostMemoryRef& host) {
  if (host.fd < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s runs in a worker: host memory must come with its memfd", info().id));
  }
  const int fd = fcntl(host.fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return absl::ResourceExhaustedError("cannot duplicate a buffer's memfd");
  return host_->add_buffer(std::make_unique<WorkerBuffer>(*this, host.bytes,
                                                          static_cast<std::byte*>(host.data), fd,
                                                          /*owns_mapping=*/false));
}

absl::StatusOr<std::unique_ptr<Queue>> IsolatedDevice::create_queue(absl::Duration launch_timeout) {
  return host_->add_queue(std::make_unique<WorkerQueue>(*this, launch_timeout));
}

absl::StatusOr<std::unique_ptr<Queue>> WorkerHost::add_queue(std::unique_ptr<WorkerQueue> q) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = ensure_worker(); !s.ok()) return s;
  q->id_ = next_id_++;
  if (absl::Status s = give_queue(*q, absl::Now() + pool_.options().start_timeout); !s.ok()) {
    q->id_ = 0;
    return s;
  }
  queues_[q->id_] = q.get();
  return std::unique_ptr<Queue>(std::move(q));
}

absl::StatusOr<std::shared_ptr<ProgressPage>> IsolatedDevice::lend_channel(
    Queue& queue, int channel_fd, ServeChannelRecord* loan) {
  return static_cast<WorkerQueue&>(queue).lend(channel_fd, loan);
}

LoanView IsolatedDevice::look_at_loan(Queue& queue) {
  return static_cast<WorkerQueue&>(queue).look_at_loan();
}

void IsolatedDevice::expire_loan(Queue& queue, const absl::Status& why) {
  static_cast<WorkerQueue&>(queue).expire_loan(why);
}

LoanReturn IsolatedDevice::end_loan(Queue& queue) {
  return static_cast<WorkerQueue&>(queue).end_loan();
}

}  // namespace kad::server::worker
