// A device whose kernels run in a worker process (DESIGN §8). The daemon
// keeps everything it trusts — handles, validation, the launch pipeline, the
// buffers' memory — and an IsolatedDevice forwards only the driver's part
// (compile, launch, wait) to one worker process (its WorkerHost). On a CPU
// device each session gets one of its own, so a kernel can reach only its
// own session's memory, and a crash or a hang costs only that session; with
// WorkerScope::kDevice every session on the device shares one.
//
// Buffers live in memfds the daemon owns and maps; the worker maps them too.
// When a worker dies (a signal, a deadline), the launches it held are lost:
// the next wait on each queue that had some reports ABORTED (or, for the
// launch that ran past its deadline, DEADLINE_EXCEEDED) naming the kernel,
// how the worker ended and the launches lost. The next request starts a new
// worker and gives it the buffers and queues again (of every session it
// serves); kernels are
// loaded into it as launches need them.
//
// A kernel is compiled by a compile worker started for that compile alone,
// which hands back the driver's program binary and is stopped; the daemon
// keeps the binary (in memory and in its code cache) and every session's
// worker loads it. No worker writes a cache that another reads, so a worker
// its kernel took over cannot plant code in another session's.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "core/backend.h"
#include "server/worker/cpu_groups.h"
#include "server/worker/queue_progress.h"
#include "server/worker/wide_builds.h"
#include "server/worker/worker_pool.h"
#include "server/worker/worker_process.h"
#include "server/worker/worker_protocol.h"

namespace kad::server::worker {

class WorkerBuffer;
class WorkerQueue;

// A client's shared-memory channel lent to the session's worker (the direct
// path, served_channel.h), as kad follows it.
struct LoanView {
  bool lent = false;      // still the worker's: not handed back, and the worker lives
  uint64_t launches = 0;  // run by the worker so far
  uint64_t records = 0;   // taken by the worker so far
  uint64_t ended = 0;     // of the launches, those that have ended
  // A launch not yet ended, or a record waiting for one: the deadline runs.
  bool running_launch = false;
  uint64_t bytes_in = 0, bytes_out = 0;  // copied by the worker so far
  absl::Duration launch_timeout;
};

// What the worker had done when a loan ended.
struct LoanReturn {
  uint64_t launches = 0;                 // the queue's events event_base + 1 ... + launches
  uint64_t bytes_in = 0, bytes_out = 0;  // copied by the worker
  uint32_t submit_head = 0, completion_tail = 0;
  // The record the worker took and did not answer (LoanTaking: a ping or
  // a copy, a run, the last of `launches`, or a wait; kNone: none): kad
  // answers it with `status`.
  LoanTaking answering = LoanTaking::kNone;
  uint64_t tag = 0;
  absl::Status status;
  bool worker_lost = false;  // the loan ended with its worker (died, or ended by kad)
};

// A kernel compiled once, by a compile worker. It holds what any worker
// needs to load it, so that every session's worker shares one compile per
// key: the compile request, with the driver's program binary where the
// device keeps them.
class WorkerKernel final : public CompiledKernel {
 public:
  WorkerKernel(uint64_t id, std::string entry, KernelLimits limits,
               std::optional<std::vector<KernelParameter>> parameters, uint64_t compute_units,
               std::shared_ptr<const std::string> request, std::string wide_key = {})
      : id_(id),
        entry_(std::move(entry)),
        limits_(limits),
        parameters_(std::move(parameters)),
        compute_units_(compute_units),
        request_(std::move(request)),
        wide_key_(std::move(wide_key)) {}
  const KernelLimits& limits() const override { return limits_; }
  uint64_t launch_configuration(uint64_t nitems, uint64_t max_items) const override;
  const std::vector<KernelParameter>* parameters() const override {
    return parameters_ ? &*parameters_ : nullptr;
  }
  uint64_t host_bytes() const override { return request_->size(); }
  uint64_t id() const { return id_; }
  const std::string& entry() const { return entry_; }
  const std::shared_ptr<const std::string>& request() const { return request_; }
  // The code cache's key of its build for the wide device beside the
  // workers' own (wide_builds.h); empty where they have none.
  const std::string& wide_key() const { return wide_key_; }

 private:
  uint64_t id_;
  std::string entry_;
  KernelLimits limits_;
  std::optional<std::vector<KernelParameter>> parameters_;
  uint64_t compute_units_;
  // A serialized worker.v1.Compile, charged to kad's host-memory guard
  // for as long as anyone (this kernel, the pool's recent kernels) holds it.
  std::shared_ptr<const std::string> request_;
  std::string wide_key_;
};

// A session's share of the CPU, as its tenant's: the tenant's CPU group
// (cpu_groups.h) where kad makes them, and the niceness of every thread of
// its workers in any case (all there is without groups).
struct CpuShare {
  int nice = 0;
  CpuGroups* groups = nullptr;
  std::string tenant;
  uint32_t weight = 1;
  int higher_classes = 0;  // priority classes above the tenant's
};

class IsolatedDevice;

// kad's side of one worker process: the process, the lock its requests
// take, the buffers and queues it was given (every session's that shares
// it), the kernels it loaded, and what is lost with it. A new worker gets
// them all again at the next request.
class WorkerHost final : public DeadlineWatched {
 public:
  // `shared` is the daemon's own device object: its description only is used.
  // `share`: where its workers go, and their niceness. `owner`: whose code
  // its worker runs (WorkerPool::remember), the only code other than its
  // sessions' own that it may hold.
  WorkerHost(Device& shared, WorkerPool& pool, WorkerScope scope, CpuShare share = {},
             std::string owner = {})
      : shared_(shared),
        pool_(pool),
        scope_(scope),
        share_(std::move(share)),
        owner_(std::move(owner)) {}
  ~WorkerHost() override;  // stops the worker

  const DeviceInfo& info() const { return shared_.info(); }
  WorkerScope scope() const { return scope_; }
  void check_deadlines() override;
  // Kills the worker now, without waiting for a request in progress (which
  // then fails): for a session that closes, where the worker is its own.
  void stop_worker();
  // The worker's process id now, 0 when none runs (for tests and status).
  pid_t worker_pid() const { return running_pid_.load(); }

 private:
  friend class IsolatedDevice;
  friend class WorkerBuffer;
  friend class WorkerQueue;

  // "the session's worker" or "the device's worker", for messages.
  const char* whose() const;
  // ", which runs every session's kernels there," for the device's worker.
  const char* shared_by_sessions() const;
  absl::Status ensure_worker() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reads the worker's answer to a request, `deadline` being enough for a
  // worker that is free. Where the worker runs kernels in the thread that
  // reads requests (WorkerOptions::kernels_hold_requests), it reads this
  // one once the launches sent before it have run: the wait follows them,
  // each to its own deadline, and a launch past it stops the worker there,
  // as the watchdog would (it passes over a device whose request holds
  // mu_): its queue is told DEADLINE_EXCEEDED, and the request fails.
  absl::Status read_answer(absl::Time deadline, absl::Status* reported, uint32_t* flags = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The worker failed to answer (`why`): ends it, and tells every queue
  // which of its launches were lost. `deadline_queue` ran past its deadline;
  // `stop`: kad stops it for another deadline (a compile's). Either is
  // counted as a deadline, not a crash, and the worker is killed at once.
  void lose_worker(const absl::Status& why, const WorkerQueue* deadline_queue, bool stop = false)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends a request and returns the worker's answer, waiting until
  // `deadline`; a worker that does not answer is lost (UNAVAILABLE).
  absl::Status call(Op op, std::span<const std::byte> a, int fd, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status load(const WorkerKernel& kernel) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The worker asked for kernel `id`'s build for the wide device.
  void note_wide_want(uint64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // At a launch of `kernel`: has its build made if the worker asked for it,
  // and hands the worker every build asked for that is done. An error: the
  // worker was lost.
  absl::Status serve_wide_wants(const WorkerKernel& kernel) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Creates `queue` in the worker, with a new progress page.
  absl::Status give_queue(WorkerQueue& queue, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends the worker if it hung up: a wait that sleeps on a progress page
  // would not see it otherwise.
  void check_alive() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::unique_ptr<Buffer>> add_buffer(std::unique_ptr<WorkerBuffer> buffer);
  absl::StatusOr<std::unique_ptr<Queue>> add_queue(std::unique_ptr<WorkerQueue> queue);

  Device& shared_;
  WorkerPool& pool_;
  const WorkerScope scope_;
  const CpuShare share_;
  const std::string owner_;
  mutable absl::Mutex mu_;
  std::unique_ptr<WorkerProcess> worker_ ABSL_GUARDED_BY(mu_);
  std::atomic<pid_t> running_pid_{0};  // worker_'s, readable without mu_
  std::atomic<bool> closing_{false};   // stop_worker was called: its session closes
  absl::flat_hash_set<uint64_t> loaded_ ABSL_GUARDED_BY(mu_);  // kernels the worker has
  // Kernels whose build for the wide device the worker asked for: null
  // until a launch of the kernel has it made, then the build until it is
  // done and handed over (and then erased: the worker has it).
  absl::flat_hash_map<uint64_t, std::shared_ptr<const WideBuilds::Build>> wide_wanted_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<uint64_t> wide_given_ ABSL_GUARDED_BY(mu_);
  static constexpr size_t kWideTables = 16;  // their room, made once per worker
  // Every buffer and queue the worker holds, of every session it serves:
  // ids come from one counter per worker host.
  absl::flat_hash_map<uint64_t, WorkerBuffer*> buffers_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, WorkerQueue*> queues_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;  // workers lost so far
};

// One session's view of a device whose driver runs in a worker: the
// `Device` its buffers and queues belong to. The worker is the session's
// own (WorkerScope::kSession) or shared by every session on the device.
class IsolatedDevice final : public Device {
 public:
  // A worker of the session's own.
  IsolatedDevice(Device& shared, WorkerPool& pool, CpuShare share = {}, std::string owner = {})
      : shared_(shared),
        host_(std::make_shared<WorkerHost>(shared, pool, WorkerScope::kSession, std::move(share),
                                           std::move(owner))) {}
  // The worker of `host`, which other sessions may share.
  IsolatedDevice(Device& shared, std::shared_ptr<WorkerHost> host)
      : shared_(shared), host_(std::move(host)) {}

  const DeviceInfo& info() const override { return shared_.info(); }
  absl::StatusOr<std::unique_ptr<Buffer>> allocate(uint64_t bytes) override;
  absl::StatusOr<std::unique_ptr<Buffer>> import_host_memory(const HostMemoryRef& host) override;
  // A queue whose launches may each run `launch_timeout`.
  absl::StatusOr<std::unique_ptr<Queue>> create_queue(absl::Duration launch_timeout);
  absl::StatusOr<std::unique_ptr<Queue>> create_queue() override {
    return create_queue(host_->pool_.options().launch_timeout);
  }
  std::string compiler_options(const KernelSignature& signature,
                               const Specialization& spec) const override {
    return shared_.compiler_options(signature, spec);
  }
  absl::StatusOr<std::unique_ptr<CompiledKernel>> compile(const CompileRequest& request) override;

  const std::shared_ptr<WorkerHost>& host() const { return host_; }
  // Whether the worker is this session's alone: its close then ends it.
  bool owns_worker() const { return host_->scope() == WorkerScope::kSession; }
  // For a session that closes: kills its own worker now (a shared one
  // serves the other sessions on).
  void stop_worker() {
    if (owns_worker()) host_->stop_worker();
  }
  pid_t worker_pid() const { return host_->worker_pid(); }

  // The direct path, for `queue` (one of this device's queues). Lends a
  // client's channel (its memfd) to the worker: `loan` gains the worker's
  // queue and the launch kad last sent it (the plan's), which must be the
  // queue's newest and have ended. The page where the worker reports.
  absl::StatusOr<std::shared_ptr<ProgressPage>> lend_channel(Queue& queue, int channel_fd,
                                                             ServeChannelRecord* loan);
  // How the loan stands; a worker that hung up is lost here.
  LoanView look_at_loan(Queue& queue);
  // Ends the worker that holds the loan (`why`: its launch or a recall ran
  // past the deadline); look_at_loan then says it is no longer lent.
  void expire_loan(Queue& queue, const absl::Status& why);
  // Takes the loan back once it is no longer lent: the worker's launches
  // become the queue's, as if kad had sent them.
  LoanReturn end_loan(Queue& queue);

 private:
  Device& shared_;
  std::shared_ptr<WorkerHost> host_;
};

}  // namespace kad::server::worker
