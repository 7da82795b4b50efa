#include "server/worker/worker_main.h"

#include <linux/close_range.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "core/code_cache.h"
#include "core/driver_scope.h"
#include "core/kernel_lowering.h"
#include "kad/shm/v1/ring.h"
#include "server/worker/abort_status.h"
#include "server/worker/end_frontier.h"
#include "server/worker/fault_witness.h"
#include "server/worker/launch_executor.h"
#include "server/worker/launch_ring.h"
#include "server/worker/queue_progress.h"
#include "server/worker/served_channel.h"
#include "server/worker/worker_codec.h"
#include "server/worker/worker_protocol.h"

namespace kad::server::worker {
namespace {

// The daemon's memory, mapped here for the device to compute on.
struct ImportedBuffer {
  void* data = MAP_FAILED;
  uint64_t bytes = 0;
  std::unique_ptr<Buffer> buffer;       // released before the mapping goes
  std::unique_ptr<Buffer> wide_buffer;  // the same memory on the wide device, if any
  ~ImportedBuffer() {
    wide_buffer.reset();
    buffer.reset();
    if (data != MAP_FAILED) munmap(data, bytes);
  }
};

// Where a worker's kernels ask kad for their builds for the wide device:
// the launch ring, once kad attached it. Launches of several queues ask at
// once, each from its own thread.
class WideWants {
 public:
  void attach(LaunchRing* ring) {
    absl::MutexLock lock(&mu_);
    ring_ = ring;
  }
  // False without a ring: ask again at a later launch.
  bool ask(uint64_t kernel) {
    absl::MutexLock lock(&mu_);
    if (ring_ == nullptr) return false;
    ring_->want_wide(kernel);
    return true;
  }

 private:
  absl::Mutex mu_;
  LaunchRing* ring_ ABSL_GUARDED_BY(mu_) = nullptr;
};

// A kernel the daemon had this worker load or compile, how its last launch
// went, and its build for the wide device (launch_executor.h). That build
// takes some 0.5 s (PoCL's pthread build): kad has a compile worker make it
// when a launch first wants it, once per key for every session's worker
// (and keeps it in its code cache), and hands it here (kLoadWide); the
// kernel's launches go on on one core meanwhile. A worker, which runs its
// client's code, builds nothing that another loads.
class LoadedKernel final : public ExecutedKernel {
 public:
  LoadedKernel(uint64_t id, std::unique_ptr<CompiledKernel> kernel, Device* wide_device,
               std::optional<OwnedCompileRequest> request, WideWants* wants)
      : id_(id),
        kernel_(std::move(kernel)),
        wide_device_(wide_device),
        request_(std::move(request)),
        wants_(wants) {
    if (wide_device_ == nullptr || !request_) wide_choice.rule_out();
  }
  CompiledKernel& kernel() { return *kernel_; }
  CompiledKernel* wide() override {
    if (built_.load(std::memory_order_acquire)) return wide_.get();
    if (!asked_.load(std::memory_order_relaxed) && wide_device_ != nullptr && request_ &&
        !asked_.exchange(true) && !wants_->ask(id_))
      asked_.store(false);
    return nullptr;
  }
  // The request loop: kad's answer to the kernel's want, a program binary
  // for the wide device (empty: none was built).
  absl::Status load_wide(std::span<const std::byte> binary) {
    if (built_.load(std::memory_order_acquire) || wide_device_ == nullptr || !request_)
      return absl::OkStatus();
    absl::StatusOr<std::unique_ptr<CompiledKernel>> loaded =
        binary.empty()
            ? absl::UnavailableError("kad has no build of it for the wide device")
            : wide_device_->load_program_binary(
                  request_->view(),
                  absl::string_view(reinterpret_cast<const char*>(binary.data()), binary.size()));
    if (!loaded.ok()) {  // it runs on the narrow device, as before
      wide_choice.rule_out();
      std::fprintf(stderr, "kad worker: kernel `%s` stays on one core: %s\n",
                   request_->signature.entry.c_str(),
                   std::string(loaded.status().message()).c_str());
      return loaded.status();
    }
    wide_ = *std::move(loaded);
    built_.store(true, std::memory_order_release);
    return absl::OkStatus();
  }

 private:
  const uint64_t id_;  // kad's
  std::unique_ptr<CompiledKernel> kernel_;
  Device* wide_device_;
  const std::optional<OwnedCompileRequest> request_;
  WideWants* wants_;
  std::atomic<bool> asked_{false};
  // wide_ is written once, by the request loop, before built_ says so.
  std::unique_ptr<CompiledKernel> wide_;
  std::atomic<bool> built_{false};
};

struct WorkerQueueState;

// One launch's end, as the driver calls it back (Queue::notify_ended).
struct LaunchEnd : EndCallback {
  WorkerQueueState* state = nullptr;
  uint64_t seq = 0;                  // the launch it reports
  std::atomic<bool> pending{false};  // registered, not yet called back
};

// A queue's launches in this worker, numbered from 1 as the daemon counts
// them, and the driver's events for the newest of them. The request loop
// launches. Each launch's end is reported on the progress page the daemon
// reads (queue_progress.h): where the driver calls back when a launch ends,
// by that call, on the driver's thread; elsewhere by the queue's reaper
// thread, which waits for each launch in turn (a wake-up more per launch).
struct WorkerQueueState {
  static constexpr uint64_t kRing = EndFrontier::kRing;
  std::unique_ptr<Queue> queue;
  std::shared_ptr<ProgressPage> page;
  uint64_t next_launch = 1;  // the request loop's own count
  uint64_t loan_base = 0;    // the launches before its channel's loan, if lent
  std::atomic<uint64_t> launched{0};
  std::atomic<uint32_t> launched_word{0};  // launched's low bits: the reaper's futex word
  std::atomic<uint32_t> reaper_sleeping{0};
  std::atomic<bool> released{false};
  std::array<std::atomic<EventId>, kRing> events{};
  // Set at the first launch: whether the driver calls back (then the reaper
  // only waits for the release, and for the calls still to come).
  std::optional<bool> calls_back;
  // Where the driver runs kernels inside the enqueue: the queue's thread for
  // its long launches, the short ones running on the request loop (instead
  // of the reaper; launch_executor.h), and its queue on the wide device.
  std::unique_ptr<LaunchExecutor> executor;
  std::unique_ptr<Queue> wide_queue;
  std::array<LaunchEnd, kRing> ends;
  // The calls may come in any order, from any driver thread: the page
  // learns only what every launch up to it has said.
  EndFrontier frontier;
  std::atomic<uint64_t> pending_calls{0};
  // The first launch that failed (refused by the driver, or ended in error)
  // and was not yet reported; kWait reports it once a wait covers it.
  absl::Mutex mu;
  absl::Status failed ABSL_GUARDED_BY(mu);
  uint64_t failed_at ABSL_GUARDED_BY(mu) = 0;

  void note_failure(const absl::Status& status, uint64_t seq) {
    {
      absl::MutexLock lock(&mu);
      if (failed.ok()) {
        failed = status;
        failed_at = seq;
      }
    }
    page->report_failure();
  }
  // The first failure among launches up to `seq` not yet reported, if any,
  // which is then reported and forgotten.
  absl::Status take_failure(uint64_t seq) {
    absl::MutexLock lock(&mu);
    if (failed.ok() || failed_at > seq) return absl::OkStatus();
    page->progress().failed.store(0, std::memory_order_release);
    return std::exchange(failed, absl::OkStatus());
  }
  // Launch `seq` has ended and its failure, if any, is noted.
  void mark_ended(uint64_t seq) {
    if (const uint64_t to = frontier.mark_ended(seq); to != 0) page->report(to);
  }
  // Wakes the reaper if it sleeps (after `launched` or `released` changed).
  void wake_reaper() {
    if (reaper_sleeping.load(std::memory_order_seq_cst) != 0) shm::v1::futex_wake(&launched_word);
  }
};

// The driver's call when a launch ends. Every launch before it has ended
// too (the queue is in order), but their calls may still be to come.
void launch_ended(EndCallback* self, const absl::Status& status) {
  auto* end = static_cast<LaunchEnd*>(self);
  WorkerQueueState& s = *end->state;
  if (!status.ok()) s.note_failure(status, end->seq);
  s.mark_ended(end->seq);
  end->pending.store(false, std::memory_order_release);
  s.pending_calls.fetch_sub(1, std::memory_order_release);
}

// Reapers still running: the worker ends only once they have let go of
// their driver queues (or, if a kernel holds one, without cleaning up).
std::atomic<int> g_live_reapers{0};

// Stops a queue's reaper once it is back from the driver (its executor
// once it has run the launches it was given).
void release(WorkerQueueState& s) {
  if (s.executor) {
    s.executor->release();
    return;
  }
  s.released.store(true, std::memory_order_seq_cst);
  s.launched_word.fetch_add(1, std::memory_order_seq_cst);
  s.wake_reaper();
}

// The reaper: waits for the queue's launches one by one, in order, and
// reports each end at once, so that the daemon sees every completion as it
// happens. A launch whose event left the ring (more than kRing behind) is
// covered by waiting for the oldest event held: the queue is in order.
// Where the driver calls back, launches do not wake the reaper: it sleeps
// until the release.
void reap_until_released(WorkerQueueState& s) {
  uint64_t done = 0;
  while (!s.released.load(std::memory_order_acquire)) {
    const uint32_t word = s.launched_word.load(std::memory_order_seq_cst);
    const uint64_t launched = s.launched.load(std::memory_order_acquire);
    if (launched == done) {
      s.reaper_sleeping.store(1, std::memory_order_seq_cst);
      if (s.launched_word.load(std::memory_order_seq_cst) == word && !s.released.load()) {
        shm::v1::futex_wait(&s.launched_word, word, -1);
      }
      s.reaper_sleeping.store(0, std::memory_order_relaxed);
      continue;
    }
    uint64_t next = done + 1;
    if (launched - next >= WorkerQueueState::kRing) next = launched - WorkerQueueState::kRing + 1;
    const EventId event = s.events[next % WorkerQueueState::kRing].load(std::memory_order_relaxed);
    if (event != 0) {
      if (absl::Status ended = s.queue->wait(event); !ended.ok()) s.note_failure(ended, next);
    }
    done = next;
    s.page->report(done);
  }
}

void reap(std::shared_ptr<WorkerQueueState> state) {
  reap_until_released(*state);
  // Calls the driver still owes point into the state: it goes after them.
  // A launch that never ends keeps it (and the reaper: see stop_reapers).
  if (state->pending_calls.load(std::memory_order_acquire) > 0) {
    state->queue->finish().IgnoreError();
    while (state->pending_calls.load(std::memory_order_acquire) > 0)
      std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  state.reset();  // the driver's queue goes while its device is still there
  g_live_reapers.fetch_sub(1, std::memory_order_release);
}

// A launch of an executor's queue has run: reported at once.
struct ReportEnd {
  WorkerQueueState& s;
  void failed(uint64_t seq, const absl::Status& status) const { s.note_failure(status, seq); }
  void ended(uint64_t seq) const { s.page->report(seq); }
  std::atomic<uint64_t>* faulted() const { return &s.page->progress().faulted; }
};

// A queue's executor thread: runs its launches and reports each end at once.
void execute(std::shared_ptr<WorkerQueueState> state) {
  t_kad_service_thread = true;  // kad's own thread, as the allocation tests count
  pthread_setname_np(pthread_self(), "kad-queue");
  WorkerQueueState& s = *state;
  s.executor->run(*s.queue, s.wide_queue.get(), ReportEnd{s});
  state.reset();  // the driver's queue goes while its device is still there
  g_live_reapers.fetch_sub(1, std::memory_order_release);
}

class WorkerServer {
 public:
  WorkerServer(int fd, Device& device, bool kernels_run_in_enqueue, Device* wide)
      : connection_(fd),
        device_(device),
        kernels_run_in_enqueue_(kernels_run_in_enqueue),
        wide_(kernels_run_in_enqueue ? wide : nullptr) {}

  int run() {
    MessageReader reader(connection_);
    for (;;) {
      if (absl::Status s = take_ring_launches(); !s.ok()) return broken(s);
      serve_channels();
      Header header;
      std::span<const std::byte> payload;
      int fd = -1;
      // With a launch ring, the worker sleeps on the ring, where kad wakes
      // it for a launch, a message or its hang-up (finish()); it reads its
      // socket only when kad says a message is owed (kad checks the count at
      // each answer), and looks at it every 5 s it slept, should kad have
      // hung up some other way (every way it ends a worker wakes or kills it).
      if (ring_ && !reader.has_unread() && !ring_->message_owed(messages_read_)) {
        // A lent channel's client that spins gets a worker that spins too.
        if (spin_for_channels()) continue;
        const absl::Time slept = absl::Now();
        std::array<LaunchRing::AlsoWake, LaunchRing::kMaxAlsoWake> also;
        const size_t nalso = channels_to_wake_us(also);
        ring_->sleep(
            kSleepCheck,
            [this] { return ring_->message_owed(messages_read_) || channel_has_work(); },
            std::span<const LaunchRing::AlsoWake>(also.data(), nalso));
        for (auto& [id, c] : channels_) c->set_sleeping(false);
        if (ring_->has_next() || ring_->message_owed(messages_read_) ||
            absl::Now() - slept < kSleepCheck || !readable())
          continue;
      }
      // A message is owed (or part of one came, or kad hung up): it comes
      // whole now.
      const absl::Status got =
          reader.next(&header, &payload, &fd, absl::InfiniteFuture(), uint64_t{1} << 40);
      // The daemon hung up (or is gone): the worker's work is over.
      if (!got.ok()) return stop_reapers();
      if (ring_) {
        ++messages_read_;
        ring_->note_message_read();
      }
      // Every launch kad wrote before it sent this message goes first.
      if (absl::Status s = take_ring_launches(); !s.ok()) return broken(s);
      if (absl::Status s = handle(static_cast<Op>(header.op), payload, fd); !s.ok()) {
        // The daemon sent what it never sends: give up rather than guess.
        std::fprintf(stderr, "kad worker: %s\n", std::string(s.message()).c_str());
        return 3;
      }
    }
  }

 private:
  // The lent channels' records (served_channel.h).
  void serve_channels() {
    for (auto& [id, c] : channels_) {
      if (!c->serving()) continue;
      auto q = queues_.find(id);
      if (q == queues_.end()) continue;
      WorkerQueueState& state = *q->second;
      DirectQueue queue(*this, state);
      c->serve(queue);
    }
  }
  bool channel_has_work() const {
    for (const auto& [id, c] : channels_)
      if (c->has_work()) return true;
    return false;
  }
  // Spins a while for what a spinning client of a lent channel writes next:
  // whether something came.
  bool spin_for_channels() const {
    bool spins = false;
    for (const auto& [id, c] : channels_) spins = spins || c->client_spins();
    if (!spins) return false;
    for (int i = 0; i < shm::v1::kSpinIterations; ++i) {
      if (ring_->has_next() || ring_->message_owed(messages_read_) || channel_has_work())
        return true;
      if ((i & 4095) == 4095)
        sched_yield();
      else
        shm::v1::cpu_relax();
    }
    return false;
  }
  // The lent channels' words that end the worker's sleep, each asking its
  // client to wake it.
  size_t channels_to_wake_us(std::array<LaunchRing::AlsoWake, LaunchRing::kMaxAlsoWake>& also) {
    size_t n = 0;
    for (auto& [id, c] : channels_) {
      if (!c->serving() || n == also.size()) continue;
      c->set_sleeping(true);
      also[n++] = {c->tail_word(), c->tail_seen()};
    }
    return n;
  }
  // A lent channel's queue (served_channel.h): its launches are launched
  // as kad's are, and waited for here when a record asks.
  class DirectQueue final : public LentQueue {
   public:
    DirectQueue(WorkerServer& worker, WorkerQueueState& state) : worker_(worker), state_(state) {}
    void submit(const LaunchRecord& r) override {
      std::memcpy(&worker_.launch_, &r, r.wire_size());
      worker_.launch();
    }
    absl::Status wait(uint64_t n, bool report) override {
      const uint64_t seq = state_.loan_base + n;
      QueueProgress& p = state_.page->progress();
      for (int i = 0; p.completed.load(std::memory_order_acquire) < seq; ++i) {
        if (i < shm::v1::kSpinIterations) {
          shm::v1::cpu_relax();
          continue;
        }
        const uint32_t seen = p.changes.load(std::memory_order_acquire);
        if (p.completed.load(std::memory_order_acquire) >= seq) break;
        state_.page->sleep_while_unchanged(seen, absl::Milliseconds(10));
      }
      return report ? state_.take_failure(seq) : absl::OkStatus();
    }
    std::byte* memory(uint64_t id, uint64_t end) override {
      auto b = worker_.buffers_.find(id);
      if (b == worker_.buffers_.end() || end > b->second->bytes) return nullptr;
      return static_cast<std::byte*>(b->second->data);
    }

   private:
    WorkerServer& worker_;
    WorkerQueueState& state_;
  };

  int broken(const absl::Status& s) {
    std::fprintf(stderr, "kad worker: %s\n", std::string(s.message()).c_str());
    return 3;
  }
  bool readable() const {
    pollfd p{connection_.fd(), POLLIN, 0};
    return poll(&p, 1, 0) > 0;
  }
  absl::Status take_ring_launches() {
    if (!ring_) return absl::OkStatus();
    while (ring_->has_next()) {
      const absl::Status s = decode_and_launch(ring_->next());
      ring_->take();
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }

  // Ends every reaper before the device goes; a reaper a kernel still holds
  // in the driver cannot end, and then the worker leaves at once.
  int stop_reapers() {
    channels_.clear();
    for (auto& [id, q] : queues_) release(*q);
    queues_.clear();
    for (int i = 0; i < 1000 && g_live_reapers.load(std::memory_order_acquire) > 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (g_live_reapers.load(std::memory_order_acquire) > 0) _exit(0);
    return 0;
  }

  template <typename T>
  static absl::Status read(std::span<const std::byte> payload, T* out, size_t min = sizeof(T)) {
    if (payload.size() < min || payload.size() > sizeof(T)) {
      return absl::InternalError(absl::StrFormat("a message of %d bytes", payload.size()));
    }
    *out = T{};
    std::memcpy(out, payload.data(), payload.size());
    return absl::OkStatus();
  }

  absl::Status reply(const absl::Status& status, uint32_t flags = 0) {
    StatusRecord r{static_cast<int32_t>(status.code()), flags};
    const absl::string_view m = status.message();
    return connection_.send(Op::kStatus, bytes_of(r),
                            std::as_bytes(std::span<const char>(m.data(), m.size())));
  }

  absl::Status handle(Op op, std::span<const std::byte> payload, int fd) {
    switch (op) {
      case Op::kLaunch: {
        absl::Status s = decode_and_launch(payload);
        if (ring_) ring_->note_socket_launch_taken();
        return s;
      }
      case Op::kLaunchRing: {
        IdRecord r;
        if (absl::Status s = read(payload, &r); !s.ok()) return s;
        if (fd < 0) return absl::InternalError("a launch ring came without its memory");
        absl::StatusOr<std::unique_ptr<LaunchRing>> ring = LaunchRing::map(fd);
        if (ring.ok()) {
          wide_wants_.attach(nullptr);  // before the ring it names goes
          ring_ = *std::move(ring);
          wide_wants_.attach(ring_.get());
        }
        return reply(ring.status());
      }
      case Op::kWait: {
        WaitRecord w;
        if (absl::Status s = read(payload, &w); !s.ok()) return s;
        return reply(wait(w));
      }
      case Op::kCompile:
      case Op::kCompileWide:
      case Op::kLoadKernel:
        return compile(op, payload);
      case Op::kLoadWide: {
        IdRecord id;
        if (payload.size() < sizeof id) return absl::InternalError("short wide build");
        std::memcpy(&id, payload.data(), sizeof id);
        auto k = kernels_.find(id.id);
        if (k == kernels_.end()) return reply(absl::NotFoundError("no such kernel"));
        return reply(k->second->load_wide(payload.subspan(sizeof id)));
      }
      case Op::kImportBuffer: {
        ImportRecord r;
        if (absl::Status s = read(payload, &r); !s.ok()) return s;
        return reply(import(r, fd));
      }
      case Op::kFreeBuffer: {
        IdRecord r;
        if (absl::Status s = read(payload, &r); !s.ok()) return s;
        buffers_.erase(r.id);
        return absl::OkStatus();
      }
      case Op::kCreateQueue: {
        IdRecord r;
        if (absl::Status s = read(payload, &r); !s.ok()) return s;
        if (fd < 0) return absl::InternalError("a queue came without its progress page");
        absl::StatusOr<std::shared_ptr<ProgressPage>> page = ProgressPage::map(fd);
        if (!page.ok()) return reply(page.status());
        absl::StatusOr<std::unique_ptr<Queue>> q = device_.create_queue();
        if (q.ok()) {
          auto state = std::make_shared<WorkerQueueState>();
          state->queue = *std::move(q);
          state->page = *std::move(page);
          if (kernels_run_in_enqueue_) {
            if (wide_ != nullptr) {
              // None: the queue's launches stay on the narrow device.
              if (absl::StatusOr<std::unique_ptr<Queue>> w = wide_->create_queue(); w.ok())
                state->wide_queue = *std::move(w);
            }
            state->executor = std::make_unique<LaunchExecutor>(state->wide_queue != nullptr);
          }
          // Detached: a reaper inside a launch that never ends must not hold
          // up the request loop when its queue is released.
          g_live_reapers.fetch_add(1, std::memory_order_relaxed);
          try {
            if (state->executor) {
              std::thread(execute, state).detach();
            } else {
              std::thread(reap, state).detach();
            }
          } catch (const std::system_error& e) {  // no thread to be had: no queue
            g_live_reapers.fetch_sub(1, std::memory_order_relaxed);
            return reply(absl::ResourceExhaustedError(
                absl::StrFormat("the worker cannot start a thread for a queue: %s", e.what())));
          }
          queues_[r.id] = std::move(state);
        }
        return reply(q.status());
      }
      case Op::kServeChannel: {
        if (fd < 0) return absl::InternalError("a channel came without its memory");
        absl::Status s = read(payload, &serve_);
        if (!s.ok()) {
          close(fd);
          return s;
        }
        auto q = queues_.find(serve_.queue);
        if (q == queues_.end()) {
          close(fd);
          return reply(absl::NotFoundError("a lent channel names no queue"));
        }
        absl::StatusOr<std::unique_ptr<ServedChannel>> channel = ServedChannel::map(fd);
        if (!channel.ok()) return reply(channel.status());
        q->second->loan_base = q->second->next_launch - 1;
        (*channel)->lend(serve_, &q->second->page->progress());
        channels_[serve_.queue] = *std::move(channel);
        return reply(absl::OkStatus());
      }
      case Op::kReleaseQueue: {
        IdRecord r;
        if (absl::Status s = read(payload, &r); !s.ok()) return s;
        channels_.erase(r.id);
        if (auto q = queues_.find(r.id); q != queues_.end()) {
          release(*q->second);
          queues_.erase(q);
        }
        return absl::OkStatus();
      }
      default:
        if (fd >= 0) close(fd);
        return absl::InternalError(absl::StrFormat("unknown request %d", static_cast<int>(op)));
    }
  }

  // A launch's wire bytes, from the ring or the socket.
  absl::Status decode_and_launch(std::span<const std::byte> payload) {
    // Only the bytes that came: the record (3 KB with every argument slot)
    // is not cleared per launch, so the size must match `nargs`.
    if (payload.size() < offsetof(LaunchRecord, args) || payload.size() > sizeof(LaunchRecord))
      return absl::InternalError(absl::StrFormat("a launch of %d bytes", payload.size()));
    std::memcpy(&launch_, payload.data(), payload.size());
    if (launch_.nargs > kMaxKernelArgs || launch_.wire_size() != payload.size()) {
      return absl::InternalError(
          absl::StrFormat("a launch of %d bytes for %d arguments", payload.size(), launch_.nargs));
    }
    launch();
    return absl::OkStatus();
  }

  // The warm path: decodes into fixed storage and enqueues; allocates
  // nothing in kad's code.
  void launch() {
    auto q = queues_.find(launch_.queue);
    auto k = kernels_.find(launch_.kernel);
    if (q == queues_.end() || k == kernels_.end() || launch_.nargs > kMaxKernelArgs) {
      std::fprintf(stderr, "kad worker: a launch names no queue or kernel\n");
      _exit(3);
    }
    WorkerQueueState& state = *q->second;
    const uint64_t seq = state.next_launch++;
    if (state.executor) {
      hand_over(state, *k->second);
      return;
    }
    CompiledKernel& kernel = k->second->kernel();
    const EventId previous =
        seq > 1 ? state.events[(seq - 1) % WorkerQueueState::kRing].load(std::memory_order_relaxed)
                : 0;
    resolve_args(args_);
    absl::StatusOr<EventId> event =
        state.queue->enqueue_kernel(kernel, launch_.geometry, launch_.context,
                                    std::span<const KernelArg>(args_.data(), launch_.nargs));
    if (!event.ok()) state.note_failure(event.status(), seq);
    // A refused launch waits for what came before it.
    const EventId ends_with = event.ok() ? *event : previous;
    state.events[seq % WorkerQueueState::kRing].store(ends_with, std::memory_order_relaxed);
    // The queue's first launch decides whether the driver calls back.
    const bool called_back =
        state.calls_back.value_or(true) && ends_with != 0 && call_back(state, seq, ends_with);
    if (!state.calls_back) state.calls_back = called_back;
    if (*state.calls_back) {
      if (!called_back) {
        // A refused launch with nothing before it still running ends here
        // (or, should the driver refuse the call, once that has ended).
        if (ends_with != 0) state.queue->wait(ends_with).IgnoreError();
        // Marked once the slot's launch kRing before has said its end.
        wait_for_call(state.ends[seq % WorkerQueueState::kRing]);
        state.mark_ended(seq);
      }
      return;
    }
    state.launched.store(seq, std::memory_order_seq_cst);
    state.launched_word.store(static_cast<uint32_t>(seq), std::memory_order_seq_cst);
    state.wake_reaper();
  }

  // The launch in launch_ (of `kernel`) to the queue's executor, or run
  // here while its launches are short (launch_executor.h).
  void hand_over(WorkerQueueState& state, LoadedKernel& kernel) {
    LaunchExecutor& executor = *state.executor;
    PreparedLaunch& p = executor.next_slot();
    p.kernel = &kernel.kernel();
    p.record = &kernel;
    p.geometry = launch_.geometry;
    p.context = launch_.context;
    p.nargs = launch_.nargs;
    p.nheld = 0;
    resolve_args(p.args);
    if (executor.may_run_here(p)) {
      executor.run_here(*state.queue, ReportEnd{state});
    } else {
      hold_buffers(p);
      executor.publish();
    }
  }

  // What keeps the buffers of the launch in launch_ mapped while the
  // executor has it (the loop may read kad's free of one meanwhile), and
  // their twins on the wide device. A launch run here needs neither: two
  // atomic counts per buffer and launch saved on the warm path.
  void hold_buffers(PreparedLaunch& p) {
    for (uint32_t i = 0; i < launch_.nargs; ++i) {
      const ArgRecord& a = launch_.args[i];
      const auto kind = static_cast<ArgKind>(a.kind);
      if (kind != ArgKind::kBuffer && kind != ArgKind::kConstBuffer) continue;
      const std::shared_ptr<ImportedBuffer>& b = buffers_.find(a.value)->second;  // resolved
      p.held[p.nheld++] = b;
      p.wide_buffers[i] = b->wide_buffer.get();
    }
  }

  // launch_'s arguments into `out`: buffer ids become this worker's buffers.
  void resolve_args(std::array<KernelArg, kMaxKernelArgs>& out) {
    for (uint32_t i = 0; i < launch_.nargs; ++i) {
      const ArgRecord& a = launch_.args[i];
      KernelArg& arg = out[i];
      arg = KernelArg{};
      arg.kind = static_cast<ArgKind>(a.kind);
      arg.scalar = static_cast<ScalarType>(a.scalar);
      arg.local_bytes = a.local_bytes;
      if (arg.kind == ArgKind::kBuffer || arg.kind == ArgKind::kConstBuffer) {
        auto b = buffers_.find(a.value);
        if (b == buffers_.end()) {
          std::fprintf(stderr, "kad worker: a launch names no buffer\n");
          _exit(3);
        }
        arg.buffer = b->second->buffer.get();
      } else {
        arg.bits = a.value;
      }
    }
  }

  // Until the launch that holds `end` has been called back: it ended, or
  // will soon (kRing launches came after it), so the wait is short.
  static void wait_for_call(const LaunchEnd& end) {
    for (int spins = 0; end.pending.load(std::memory_order_acquire); ++spins) {
      if (spins < 64) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
  }

  // Has the driver report launch `seq`'s end (that of `event`) on the page.
  // False where it calls nothing back (or no longer holds the event).
  static bool call_back(WorkerQueueState& state, uint64_t seq, EventId event) {
    LaunchEnd& end = state.ends[seq % WorkerQueueState::kRing];
    wait_for_call(end);  // the slot's launch, kRing before, may still owe its call
    end.ended = &launch_ended;
    end.state = &state;
    end.seq = seq;
    end.pending.store(true, std::memory_order_relaxed);
    state.pending_calls.fetch_add(1, std::memory_order_acq_rel);
    if (state.queue->notify_ended(event, &end)) return true;
    end.pending.store(false, std::memory_order_relaxed);
    state.pending_calls.fetch_sub(1, std::memory_order_acq_rel);
    return false;
  }

  // The daemon asks only once the progress page shows the launches ended
  // and a failure among them: the answer is the first failure up to
  // `w.event`, if any, which is then reported and forgotten.
  absl::Status wait(const WaitRecord& w) {
    auto q = queues_.find(w.queue);
    if (q == queues_.end()) return absl::InternalError("a wait names no queue");
    return q->second->take_failure(w.event);
  }

  absl::Status compile(Op op, std::span<const std::byte> payload) {
    IdRecord id;
    if (payload.size() < sizeof id) return absl::InternalError("short compile");
    std::memcpy(&id, payload.data(), sizeof id);
    wire::Compile message;
    if (!message.ParseFromArray(payload.data() + sizeof id,
                                static_cast<int>(payload.size() - sizeof id))) {
      return absl::InternalError("a compile request that does not parse");
    }
    // The code the daemon lowered, where the compile looks it up: this
    // worker's own cache (in its folder), never kad's.
    CodeCache& own_cache = KernelLowering::shared().cache();
    for (const wire::LoweredCode& code : message.lowered())
      own_cache.store(code.key(), code.code());
    absl::StatusOr<std::unique_ptr<CompiledKernel>> compiled;
    absl::StatusOr<OwnedCompileRequest> request = from_message(message);
    // Kept with its request, for the build on the wide device that kad
    // hands over should a launch want it (a session's worker loads it from
    // there; a compile worker compiles only).
    auto keep = [&](std::unique_ptr<CompiledKernel> kernel) {
      std::optional<OwnedCompileRequest> again;
      if (wide_ != nullptr && request.ok() && op == Op::kLoadKernel) again = *request;
      kernels_[id.id] = std::make_unique<LoadedKernel>(id.id, std::move(kernel), wide_,
                                                       std::move(again), &wide_wants_);
    };
    // kCompileWide: a compile worker builds for the wide device beside its own.
    Device* target = op == Op::kCompileWide ? wide_ : &device_;
    uint32_t flags = 0;
    if (!request.ok()) {
      compiled = request.status();
    } else if (target == nullptr) {
      compiled = absl::FailedPreconditionError("this worker has no wide device");
    } else if (op == Op::kLoadKernel && !message.program_binary().empty()) {
      // Built by a compile worker: loaded, not compiled again.
      compiled = device_.load_program_binary(request->view(), message.program_binary());
      flags = kLoadedProgramBinary;
    } else {
      compiled = target->compile(request->view());
    }
    if (op == Op::kLoadKernel) {
      absl::Status status = compiled.status();
      if (compiled.ok()) keep(*std::move(compiled));
      return reply(status, status.ok() ? flags : 0);
    }
    wire::CompileReply answer = to_reply(compiled);
    if (compiled.ok()) {
      // A device without program binaries leaves it empty: then each worker
      // that needs the kernel compiles it.
      absl::StatusOr<std::string> binary = target->program_binary(**compiled);
      if (binary.ok()) *answer.mutable_program_binary() = *std::move(binary);
    }
    const std::string out = answer.SerializeAsString();
    if (compiled.ok()) keep(*std::move(compiled));
    return connection_.send(Op::kCompileReply,
                            std::as_bytes(std::span<const char>(out.data(), out.size())));
  }

  absl::Status import(const ImportRecord& r, int fd) {
    if (fd < 0) return absl::InternalError("a buffer came without its memory");
    auto b = std::make_shared<ImportedBuffer>();
    b->bytes = r.bytes;
    b->data = mmap(nullptr, r.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (b->data == MAP_FAILED) {
      return absl::ResourceExhaustedError(
          absl::StrFormat("the worker cannot map a buffer of %d bytes", r.bytes));
    }
    absl::StatusOr<std::unique_ptr<Buffer>> buffer =
        device_.import_host_memory({b->data, r.bytes, -1});
    if (!buffer.ok()) return buffer.status();
    b->buffer = *std::move(buffer);
    if (wide_ != nullptr) {
      // None: launches naming it stay on the narrow device.
      absl::StatusOr<std::unique_ptr<Buffer>> wide =
          wide_->import_host_memory({b->data, r.bytes, -1});
      if (wide.ok()) b->wide_buffer = *std::move(wide);
    }
    buffers_[r.buffer] = std::move(b);
    return absl::OkStatus();
  }

  Connection connection_;
  Device& device_;
  const bool kernels_run_in_enqueue_;
  Device* const wide_;  // the wide device beside device_ (launch_executor.h), or null
  static constexpr absl::Duration kSleepCheck = absl::Seconds(5);
  std::unique_ptr<LaunchRing> ring_;  // once kad attached it (kLaunchRing)
  WideWants wide_wants_;              // through ring_
  uint64_t messages_read_ = 0;        // since then
  LaunchRecord launch_;
  std::array<KernelArg, kMaxKernelArgs> args_;
  ServeChannelRecord serve_;  // the last kServeChannel's (5 KB: not on the stack)
  // Channels kad lent, by the queue their records go to.
  absl::flat_hash_map<uint64_t, std::unique_ptr<ServedChannel>> channels_;
  absl::flat_hash_map<uint64_t, std::unique_ptr<LoadedKernel>> kernels_;
  // Shared with the launches an executor still holds (launch_executor.h).
  absl::flat_hash_map<uint64_t, std::shared_ptr<ImportedBuffer>> buffers_;
  absl::flat_hash_map<uint64_t, std::shared_ptr<WorkerQueueState>> queues_;
};

}  // namespace

void harden_worker_process(int fd) {
  // Dies with the daemon, whichever way it ends. The daemon is the peer of
  // the worker's socket (it made the pair): one that ended before the
  // death signal was set is no longer this process's parent. (Not "the
  // parent is PID 1": in a container kad itself is PID 1.)
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  ucred daemon{};
  socklen_t length = sizeof(daemon);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &daemon, &length) != 0 || getppid() != daemon.pid)
    _exit(0);
  // In a PID namespace of its own both are 0 (kad is outside it): a daemon
  // that ended has closed its end of the socket, which only it held.
  pollfd hung_up{fd, POLLRDHUP, 0};
  if (poll(&hung_up, 1, 0) != 0) _exit(0);
  // A crashing kernel leaves no core file behind, and the process cannot be
  // read by another of the same user (nor dumped).
  rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  prctl(PR_SET_DUMPABLE, 0);
  // Nothing of the daemon's reaches client code but its own connection.
  if (fd > 3) {
    dup2(fd, 3);
    close(fd);
  }
  syscall(SYS_close_range, 4u, ~0u, 0u);
  report_aborts_by_exit_status();
  install_fault_witness();
}

int serve_worker(int fd, Device* device, const absl::Status& why, const Confinement& walls,
                 bool kernels_run_in_enqueue, Device* wide_device) {
  Connection connection(fd);
  HelloRecord hello{static_cast<int32_t>(getpid()), static_cast<int32_t>(why.code()), walls.walls,
                    walls.landlock_abi};
  const absl::string_view m = why.message();
  if (!connection
           .send(Op::kHello, bytes_of(hello),
                 std::as_bytes(std::span<const char>(m.data(), m.size())))
           .ok() ||
      device == nullptr) {
    return device == nullptr ? 2 : 0;
  }
  return WorkerServer(fd, *device, kernels_run_in_enqueue, wide_device).run();
}

}  // namespace kad::server::worker
