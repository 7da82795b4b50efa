// Workers started ahead of need (DESIGN §8, §9): a new session's first
// allocation or queue takes a worker whose device is already up, and a
// thread starts the next one in the background.
//
// That one thread starts every worker, spares and those a take needs at
// once: a worker dies with the thread that started it (PR_SET_PDEATHSIG is
// the parent *thread*'s), and the pool's thread lives as long as the pool.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/worker/worker_process.h"

namespace kad::server::worker {

// What the pool's watchdog looks at: a device whose workers run launches
// with deadlines (IsolatedDevice).
class DeadlineWatched {
 public:
  virtual ~DeadlineWatched() = default;
  // Ends the worker of a launch past its deadline; never blocks on a
  // request in progress (that request enforces the deadline itself).
  virtual void check_deadlines() = 0;
};

// PoCL's driver in workers when nothing names one (--pocl-worker-driver):
// `basic` runs small kernels without a hand-off to a pool of threads and
// back, and a kernel that gains from every core on `pthread` beside it
// (wide_choice.h).
inline constexpr char kDefaultPoclWorkerDriver[] = "basic";

// What PoCL's `driver` in the workers means for the pool
// (set_pocl_worker_driver, and WorkerOptions' defaults).
// basic runs a kernel inside its enqueue: on its queue's own thread in the
// worker (launch_executor.h), but a request still waits for a slot behind a
// queue whose launches fill them all.
inline bool pocl_driver_holds_requests(std::string_view driver) { return driver == "basic"; }
// The code it builds differs from pthread's (PoCL's own: none).
inline std::string pocl_driver_build_variant(std::string_view driver) {
  return driver == "pthread" ? std::string() : "pocl driver " + std::string(driver);
}

// Beside basic, a worker runs PoCL's pthread too: the wide device on which
// a kernel's long launches get every core (launch_executor.h).
inline bool pocl_driver_has_wide_device(std::string_view driver) { return driver == "basic"; }

// Whose kernels one worker runs (--worker-scope): one session's (the
// default: a kernel on a CPU device is native code that reaches its whole
// process), or every session's on the device (one context per device, as a
// GPU's driver has it; on a CPU device, for tenants that trust each other).
enum class WorkerScope { kSession, kDevice };

struct WorkerOptions {
  WorkerCommand command;  // empty executable: no workers, kernels run in the daemon
  WorkerScope scope = WorkerScope::kSession;
  // A launch that runs longer ends its worker (--launch-timeout).
  absl::Duration launch_timeout = absl::Seconds(60);
  // A worker's compile: its compilers have --compile-timeout each, and the
  // driver's own build comes after them.
  absl::Duration compile_timeout = absl::Seconds(150);
  absl::Duration start_timeout = absl::Seconds(30);
  int spares = 1;  // started workers kept ready per device
  // These two follow the driver of PoCL's CPU device in the workers
  // (set_pocl_worker_driver); their defaults, the one a worker runs when
  // its command names none (kDefaultPoclWorkerDriver).
  // The workers' driver runs a kernel inside its enqueue (PoCL's basic
  // driver, --pocl-worker-driver): a queue's own thread runs its launches,
  // but a request behind a queue whose waiting launches fill every slot
  // (launch_executor.h) waits for the launches in progress, each up to its
  // deadline, before the worker answers. Not to be taken for a worker that
  // no longer answers.
  bool kernels_hold_requests = pocl_driver_holds_requests(kDefaultPoclWorkerDriver);
  // What, beside the device, decides the code workers build (the driver
  // they run): part of a program binary's key in kad's code cache, so that
  // a binary built for one driver never loads into another. Empty: none
  // (pthread, PoCL's own default).
  std::string build_variant = pocl_driver_build_variant(kDefaultPoclWorkerDriver);
  // Workers of PoCL's CPU device run a wide device beside it, whose builds
  // compile workers make when a session's worker asks (wide_builds.h).
  bool wide_device = pocl_driver_has_wide_device(kDefaultPoclWorkerDriver);
  // Readies a spare before anyone takes it, on the pool's thread: the
  // engine puts it into the default tenant's CPU group there, since moving
  // a process between groups takes about 10 ms (cgroup v1 waits for an RCU
  // grace period) that a new session's first request would otherwise wait.
  std::function<void(WorkerProcess&)> ready_spare = nullptr;
  // Takes `bytes` of the daemon's host-memory guard for a compiled kernel's
  // program binary, which kad keeps to load into every session's worker; the
  // charge is held as long as the returned object lives, and an error says
  // why not. Null: nothing is charged.
  std::function<absl::StatusOr<std::shared_ptr<void>>(uint64_t bytes)> charge_host_memory = nullptr;
};

// Has the workers of `options` run PoCL's CPU device on PoCL's `driver`:
// `basic` (kad's default) or `pthread` (PoCL's own) (--pocl-worker-driver).
void set_pocl_worker_driver(WorkerOptions& options, const std::string& driver);

class WideBuilds;

class WorkerPool {
 public:
  explicit WorkerPool(WorkerOptions options);
  ~WorkerPool();  // stops the spares
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  const WorkerOptions& options() const { return options_; }

  // Keeps `spares` started workers for `device_id` from now on.
  void keep_ready(const std::string& device_id);
  // A started worker for `device_id`, for a session of `owner`: a spare if
  // one is ready that holds no code but `owner`'s, else one started now.
  // A spare holding another owner's kernels stays for that owner: a
  // session's worker runs its client's code natively, which could read
  // whatever else the process holds.
  absl::StatusOr<std::unique_ptr<WorkerProcess>> take(const std::string& device_id,
                                                      const std::string& owner = {});

  // A fresh worker for one compile (DESIGN §8): started now, never given to
  // a session, and stopped by the caller after that compile, so that the
  // program binary it builds — which every session's worker then loads —
  // comes from a process in which no other client's code ever ran. Started
  // on the calling thread, which outlives it: the caller waits for the
  // compile and stops the worker before it returns.
  absl::StatusOr<std::unique_ptr<WorkerProcess>> start_compile_worker(const std::string& device_id);

  // `kernel_id` (its compile request `request`) ran on `device_id` just now
  // in a session of `owner` (its tenant and uid: those who may see each
  // other's code). Spares started from now on load the device's most recent
  // kernels (8 per device) of the owner that ran one last, so that a new
  // session's first launch of it does not wait for the driver; such a spare
  // goes to that owner's sessions only (take). The pool does not keep
  // `request` alive: a kernel nobody holds any more is not preloaded.
  void remember(const std::string& device_id, const std::string& owner, uint64_t kernel_id,
                const std::shared_ptr<const std::string>& request);

  // Kernels' builds for the wide device beside the workers' own, shared by
  // every session's worker (wide_builds.h).
  WideBuilds& wide_builds() { return *wide_builds_; }

  // Watches `device`'s launches from now until it goes: one that runs past
  // its deadline ends its worker even if nobody waits for it.
  void watch(std::weak_ptr<DeadlineWatched> device);

  struct Stats {
    uint64_t started = 0;          // workers started, spares and compile workers included
    uint64_t compile_workers = 0;  // of those, started for one compile each
    uint64_t ready = 0;            // spares started and not taken
    uint64_t ready_preloaded = 0;  // of those, holding an owner's recent kernels
    uint64_t failed_starts = 0;    // workers that failed to start, or to ready as spares
    uint64_t crashed = 0;          // workers a client's kernel ended
    uint64_t timed_out = 0;        // workers stopped at a deadline (a launch's or a compile's)
    // Kernels loaded into session workers and spares: from the program binary
    // a compile worker built, or compiled again from source (a device that
    // keeps no program binaries).
    uint64_t binary_loads = 0;
    uint64_t source_loads = 0;
    std::string walls;  // describe_walls() of the newest worker started
  };
  // A session's worker ended: by a crash, or stopped at a deadline.
  void note_lost(bool deadline);
  // A kernel was loaded into a worker, from its program binary or not.
  void note_load(bool from_binary);
  Stats stats() const;

 private:
  void refill();
  void watchdog();
  // Loads the device's recent kernels into a spare before anyone takes it.
  // A kernel the worker cannot load is left out; an error means the worker
  // itself failed (no answer, or a malformed one) and must not be used: an
  // answer it still owes would reach the session that took it. The kernel
  // it failed on is then dropped from the recent ones.
  absl::Status preload(WorkerProcess& worker, const std::string& device_id);
  // Takes waiting for `device_id` that no ready worker may serve.
  int unserved(const std::string& device_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool take_waits_for(const std::string& device_id);

  WorkerOptions options_;
  std::unique_ptr<WideBuilds> wide_builds_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::vector<std::unique_ptr<WorkerProcess>>> ready_
      ABSL_GUARDED_BY(mu_);
  std::vector<std::string> devices_ ABSL_GUARDED_BY(mu_);  // those that keep spares
  // Takes waiting for a worker, per device (their owners), and why the last
  // start failed.
  absl::flat_hash_map<std::string, std::vector<std::string>> waiting_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int> starting_ ABSL_GUARDED_BY(mu_);  // spawned, not ready
  static constexpr absl::Duration kSpareDelay = absl::Milliseconds(250);
  absl::Time last_take_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::flat_hash_map<std::string, absl::Status> failed_ ABSL_GUARDED_BY(mu_);
  uint64_t failures_ ABSL_GUARDED_BY(mu_) = 0;
  struct RecentKernel {
    uint64_t id;
    std::string owner;
    // Not kept alive here: a kernel that kad's cache dropped and no session
    // holds is preloaded no more, and its program binary is freed (and its
    // host-memory charge given back).
    std::weak_ptr<const std::string> request;
  };
  static constexpr size_t kRecentKernels = 8;
  // The most a spare may spend loading the recent kernels, all together:
  // the one thread that starts every worker does it, and takes that wait
  // for a worker wait behind it. A spare past it is stopped, and the kernel
  // it was loading is preloaded no more.
  static constexpr absl::Duration kPreloadBudget = absl::Seconds(10);
  absl::flat_hash_map<std::string, std::vector<RecentKernel>> recent_ ABSL_GUARDED_BY(mu_);
  // Per device, the owner that ran a kernel last: whose kernels spares load.
  absl::flat_hash_map<std::string, std::string> last_owner_ ABSL_GUARDED_BY(mu_);
  Stats stats_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::weak_ptr<DeadlineWatched>> watched_ ABSL_GUARDED_BY(mu_);
  std::thread refiller_;
  std::thread watchdog_;
};

}  // namespace kad::server::worker
