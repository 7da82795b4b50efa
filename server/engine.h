// The daemon's engine: the devices, the compiled-kernel cache and the
// sessions. Every transport (gRPC over UNIX or TCP, in process) calls it; it
// knows no wire format. Requests are validated here, before any driver call.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "backends/registry.h"
#include "core/kernel_cache.h"
#include "core/launch.h"
#include "core/launch_request.h"
#include "server/decoded_launch.h"
#include "server/device_scheduler.h"
#include "server/queue_finisher.h"
#include "server/request_counters.h"
#include "server/session.h"
#include "server/shm_rings.h"
#include "server/tenants.h"
#include "server/worker/worker_pool.h"

namespace kad::server {

struct EngineLimits {
  uint64_t max_sessions = 1024;
  uint64_t max_buffer_bytes_per_session = uint64_t{64} << 30;  // device memory quota
  uint64_t max_objects_per_session = 1 << 20;                  // handles of any kind
  // Transports one session holds open at once: each Submit stream takes a
  // thread (on gRPC's sync API) and a ring of replies, each shared-memory
  // channel a thread and about 1 MiB of shared memory, each transfer
  // (WriteBuffer, ReadBuffer) a thread for as long as its client keeps it open.
  uint32_t max_streams_per_session = 64;
  uint32_t max_channels_per_session = 64;
  uint32_t max_transfers_per_session = 16;
  bool zero_copy = true;  // buffers on host-visible devices live in memory clients can map
  // The longest kad waits for a session's launches to end when it frees
  // device memory, closes the session or drains (--drain-timeout).
  absl::Duration finish_timeout = absl::Seconds(30);
  // The daemon's own host memory that clients' requests make it hold
  // (module copies, zero-copy buffers' memory, shared-memory channels,
  // program binaries kept for workers; the kernel cache keeps half of it),
  // whoever asks: one guard for all (--max-host-memory). 0: half of the
  // machine's memory.
  uint64_t max_host_memory_bytes = 0;
  // Compiled kernels the shared cache keeps; past it, the least recently
  // used goes (kernels that hold one keep it alive).
  uint64_t max_compiled_kernels = KernelCache::kDefaultMaxEntries;
  // Tenants and their quotas (tenants.h); none named: everyone is `default`.
  std::vector<TenantSpec> tenants;
  // Launches a shared device takes from all sessions together; past them,
  // launches wait in kad and go to the device in fair order
  // (device_scheduler.h; --device-queue-depth). 0: straight to the device.
  uint32_t device_queue_depth = 64;
  // The direct path (--shm-direct, on unless --no-shm-direct;
  // server/README.md): a shared-memory channel whose client repeats one
  // launch (synchronous or pipelined) is lent to the session's own worker,
  // which serves it without kad.
  bool shm_direct = true;
};

struct EngineCounters {
  uint64_t sessions = 0, sessions_opened = 0;
  // Sessions whose lock a request held past the look (waiting on its
  // worker): their objects are not in the counts below.
  uint64_t sessions_busy = 0;
  uint64_t buffers = 0, modules = 0, kernels = 0, queues = 0;
  uint64_t launches = 0;
  uint64_t queue_depth = 0;  // launches submitted and not yet waited for, all queues
  // The direct path (--shm-direct): channels lent to workers now, loans in
  // all, and the launches the workers served on them (in `launches` too).
  uint64_t channels_lent = 0, channel_loans = 0, lent_launches = 0;
  std::array<uint64_t, kLoanEnds> loan_ends{};  // by LoanEnd
  KernelCache::Stats cache;
  struct PerDevice {
    std::string id;
    uint64_t launches = 0, buffers = 0, buffer_bytes = 0, queues = 0;
    // Its scheduler's (DeviceScheduler::Stats); depth 0 where it has none.
    uint32_t queue_depth = 0;
    uint64_t in_flight = 0, held = 0, held_total = 0;
    uint32_t contended_depth = 0;               // what launches share while queues compete
    LatencyHistogram::Snapshot launch_latency;  // accepted to known ended
  };
  std::vector<PerDevice> devices;
  bool draining = false;
  uint64_t host_memory_bytes = 0, host_memory_limit = 0;  // the global guard's
  // Every tenant so far, with what it uses of each quota.
  struct TenantUse {
    std::string name;
    uint32_t weight = 1;
    int32_t priority = 0;
    int cpu_nice = 0;
    struct Use {
      std::string quota;   // its config key ("queues")
      std::string device;  // for device memory
      uint64_t used = 0, limit = 0;
      uint64_t refusals = 0;  // requests refused at the limit
    };
    std::vector<Use> uses;
  };
  std::vector<TenantUse> tenants;
  struct Workers {
    uint64_t running = 0;  // sessions' workers and spares
    uint64_t started = 0, crashed = 0, timed_out = 0;
    // Kernels' builds for the wide device beside basic workers' own
    // (worker/wide_builds.h): made by compile workers, found in the code
    // cache, failed.
    uint64_t wide_built = 0, wide_from_cache = 0, wide_failed = 0;
    std::string walls;  // describe_walls() of the newest worker; empty before one
  };
  Workers workers;
};

class Engine {
 public:
  // With `workers.command` set, kernels on CPU devices run in worker
  // processes, one per session (DESIGN §8); without, in this process.
  Engine(DeviceRegistry registry, EngineLimits limits, worker::WorkerOptions workers = {});
  ~Engine();

  const DeviceRegistry& registry() const { return registry_; }
  const EngineLimits& limits() const { return limits_; }

  // A session for `caller`, counted against its tenant's quotas.
  absl::StatusOr<std::shared_ptr<Session>> open_session(std::string client_name, std::string peer,
                                                        const CallerIdentity& caller = {});
  // How a close waits for the session's launches still running.
  enum class CloseWait {
    kBounded,   // up to EngineLimits::finish_timeout, then goes on without them
    kDetached,  // not at all: a thread of the engine's waits (gRPC callbacks must not block)
  };
  // Reclaims everything the session owns: ends its launches in workers,
  // waits for its other queues as `wait` says, frees its buffers once their
  // launches have ended. Past finish_timeout, a warning says what still runs.
  void close_session(const std::string& id, CloseWait wait = CloseWait::kBounded);
  // NOT_FOUND (or FAILED_PRECONDITION when empty) for an id that names no open session.
  absl::StatusOr<std::shared_ptr<Session>> session(absl::string_view id);
  // Some of the daemon's own host memory (EngineLimits::max_host_memory_bytes),
  // or RESOURCE_EXHAUSTED naming the guard.
  absl::StatusOr<Charge> charge_host_memory(uint64_t bytes) {
    return Charge::take(host_memory_, bytes);
  }
  // The tenant `caller` is (tenants.h).
  std::shared_ptr<Tenant> tenant_of(const CallerIdentity& caller) {
    return tenants_.resolve(caller);
  }

  struct AllocatedBuffer {
    uint64_t handle;
    bool host_visible;  // the client may map it (map_buffer)
  };
  absl::StatusOr<AllocatedBuffer> allocate_buffer(Session& s, absl::string_view device_id,
                                                  uint64_t size);
  // A new fd of a zero-copy buffer's memory, for its own session's client.
  struct MappedBuffer {
    int fd;  // the caller closes it
    uint64_t bytes;
  };
  // `lock_wait`: how long to wait for the session's lock (a copy holds it
  // while it waits for the queue's launches): UNAVAILABLE past it. The
  // shared-memory handshake waits only a little, so that one session's
  // long command cannot hold up the handshakes of others.
  absl::StatusOr<MappedBuffer> map_buffer(Session& s, uint64_t buffer,
                                          absl::Duration lock_wait = absl::InfiniteDuration());
  absl::Status free_buffer(Session& s, uint64_t buffer);
  absl::Status write_buffer(Session& s, uint64_t queue, uint64_t buffer, uint64_t offset,
                            std::span<const std::byte> data);
  // The same, of bytes that arrived in pieces (Queue::write_buffer_pieces).
  absl::Status write_buffer_pieces(Session& s, uint64_t queue, uint64_t buffer, uint64_t offset,
                                   std::span<const std::span<const std::byte>> pieces);
  absl::Status read_buffer(Session& s, uint64_t queue, uint64_t buffer, uint64_t offset,
                           std::span<std::byte> data);
  // Whether `size` bytes at `offset` lie in `buffer` (NOT_FOUND, or
  // OUT_OF_RANGE naming the range): a whole streamed copy, checked before
  // its first chunk.
  absl::Status check_buffer_range(Session& s, uint64_t buffer, uint64_t offset, uint64_t size);

  struct LoadedModule {
    uint64_t handle;
    std::string digest;
  };
  absl::StatusOr<LoadedModule> load_module(Session& s, ModuleFormat format, std::string code);
  absl::StatusOr<uint64_t> get_kernel(Session& s, uint64_t module, KernelSignature signature);
  // `launch_timeout`: the client's deadline for the queue's launches (zero:
  // the daemon's), capped by the daemon's; `*effective` gets the deadline
  // the queue has (zero where none is enforced).
  absl::StatusOr<uint64_t> create_queue(Session& s, absl::string_view device_id,
                                        absl::Duration launch_timeout = absl::ZeroDuration(),
                                        absl::Duration* effective = nullptr);
  // NOT_FOUND unless the session has this queue (`lock_wait` as map_buffer's).
  absl::Status check_queue(Session& s, uint64_t queue,
                           absl::Duration lock_wait = absl::InfiniteDuration());

  // The warm path: resolves handles in fixed-size storage, launches, and
  // allocates nothing itself.
  absl::StatusOr<LaunchResult> launch(Session& s, const LaunchByHandle& request);
  // event 0: everything submitted to the queue so far.
  absl::Status wait(Session& s, uint64_t queue, EventId event);

  EngineCounters counters() const;
  // Requests and queue commands answered, by code (--metrics).
  RequestCounters& requests() { return requests_; }
  const RequestCounters& requests() const { return requests_; }
  // Refuse new launches (UNAVAILABLE) and wait for every queue to finish,
  // at most `timeout`; false when launches still run then.
  bool drain(absl::Duration timeout);
  bool draining() const { return draining_.load(); }

  // The direct path (--shm-direct; server/README.md): a channel lent to the
  // session's own worker, which answers its client's synchronous launches.
  struct ChannelLoan {
    std::shared_ptr<SessionQueue> queue;
    Queue* device_queue = nullptr;  // the worker's queue behind `queue`
    std::shared_ptr<worker::ProgressPage> page;
    EventId event_base = 0;  // the queue's event before the loan's first launch
  };
  // Lends `queue`'s channel (its memfd, the rings at `at`; `lender` its
  // thread) after the kRun record `key` launched `launched` and was answered
  // `done`: that launch must be the queue's newest, with every launch of the
  // queue ended, on the session's own worker, and the device not contended
  // (DeviceScheduler::lend_locked, which recalls it once it is).
  // FAILED_PRECONDITION where it cannot be lent now.
  absl::StatusOr<ChannelLoan> lend_channel(Session& s, uint64_t queue, EventId launched,
                                           const shm::v1::SubmitRecord& key,
                                           const shm::v1::CompletionRecord& done, int channel_fd,
                                           RingPositions at, ChannelLoans::Lender& lender);
  // Counts `n` launches more that the worker ran for a lent channel.
  void count_lent_launches(const ChannelLoan& loan, uint64_t n);
  // The loan has ended with `launches` run by the worker: they become the
  // queue's events event_base + 1 ..., ended; a failure or loss among them
  // that no wait reported is the queue's next wait's to report. `why`: for
  // the counters.
  void end_channel_loan(Session& s, const ChannelLoan& loan, uint64_t launches, LoanEnd why);
  // What a request that must find `queue` (0: every queue) as kad keeps it
  // holds while it runs (ChannelLoans): nothing without --shm-direct.
  ChannelLoans::Hold hold_channels(Session& s, uint64_t queue) {
    return limits_.shm_direct ? s.loans.hold(queue) : ChannelLoans::Hold();
  }

 private:
  absl::StatusOr<Device*> device_for(absl::string_view id) const;
  size_t device_index(const Device* device) const;
  // The device a session's buffers and queues on `shared` live on: its own
  // worker's when that device is isolated, else `shared` itself.
  Device* session_device(Session& s, Device* shared) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  bool isolated(const Device& shared) const;
  // The launch with handles resolved under the session's lock; with `defer`,
  // a launch that must compile first returns its kernel and compiles nothing.
  absl::StatusOr<LaunchResult> launch_locked(Session& s, const LaunchByHandle& request,
                                             DeferredCompile* defer,
                                             std::shared_ptr<Kernel>* kernel)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  absl::StatusOr<std::shared_ptr<SessionQueue>> find_queue(Session& s, uint64_t queue)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  // Gives back to `budget` (a tenant's launches in flight) the launches of
  // its queues, in every session, that are known to have ended though no
  // one waited for them (Queue::known_ended). On a device kad schedules its
  // scheduler does so as they end; on one it does not
  // (--device-queue-depth 0), nothing else sees them end, and one client
  // that launched up to the quota and went idle without a wait refused
  // every session of its tenant. Called when a launch finds the tenant at
  // its quota, on a kad whose devices are not scheduled; a session busy past
  // a moment is passed over.
  void reclaim_ended_launches(const Budget& budget) ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<Buffer*> find_buffer(Session& s, uint64_t buffer)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  // Whether the session may make one more object: it is not closing, and
  // holds fewer than its maximum.
  absl::Status check_new_object(Session& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  // The queue and buffer of a copy, checked to be on the same device.
  struct CopyTarget {
    SessionQueue* queue;
    Buffer* buffer;
  };
  absl::StatusOr<CopyTarget> copy_target(Session& s, uint64_t queue, uint64_t buffer)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);

  DeviceRegistry registry_;
  EngineLimits limits_;
  KernelCache cache_;
  Tenants tenants_;
  std::shared_ptr<Budget> host_memory_;
  // Tenants' CPU groups for their workers; null where kad cannot make them
  // (niceness alone then). Declared before the workers: it goes after them.
  std::unique_ptr<worker::CpuGroups> cpu_groups_;
  RequestCounters requests_;
  std::unique_ptr<worker::WorkerPool> workers_;  // null: no worker processes
  // With WorkerScope::kDevice, the one worker of each isolated device that
  // all its sessions share. Declared after the pool: it goes before it.
  absl::flat_hash_map<const Device*, std::shared_ptr<worker::WorkerHost>> device_workers_;
  std::atomic<bool> draining_{false};
  std::atomic<uint64_t> launches_{0};
  // The direct path's (EngineCounters).
  std::atomic<uint64_t> channels_lent_{0}, channel_loans_{0}, lent_launches_{0};
  std::array<std::atomic<uint64_t>, kLoanEnds> loan_ends_{};
  std::atomic<uint64_t> sessions_opened_{0};
  std::vector<std::unique_ptr<std::atomic<uint64_t>>> device_launches_;
  // One per device, whether its sessions share it in this process or run
  // in workers; null with no scheduling (--device-queue-depth 0).
  // Declared before the sessions: their queues go first.
  std::vector<std::unique_ptr<DeviceScheduler>> schedulers_;
  // Declared after the devices and the cache: destroyed before them.
  QueueFinisher finisher_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<Session>> sessions_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kad::server
