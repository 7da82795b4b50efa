// Kernels' builds for the wide device that a basic worker runs beside its
// own (PoCL's pthread driver, launch_executor.h), made by compile workers.
//
// A session's worker that finds a kernel's launches worth trying on the
// wide device asks kad for that build (LaunchRing::want_wide); kad has a
// compile worker make it, once per key for every session (concurrent wants
// of one key share one build), keeps it in its code cache, and hands the
// binary to each worker that asks (IsolatedDevice). So no session's worker
// compiles (a worker runs its client's code, and nothing it builds is
// loaded elsewhere), and 32 sessions of one kernel pay one build of some
// 0.5 s of CPU rather than 32.
//
// One thread makes the builds, one at a time: a build competes with the
// sessions' launches for the cores, and a kernel's launches go on on one
// core while it waits.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/backend.h"
#include "server/worker/stoppable_build.h"

namespace kad::server::worker {

class WorkerPool;

// The driver variant (part of the code cache's key) of builds for the wide
// device: PoCL's pthread, beside basic.
inline constexpr char kWideBuildVariant[] = "pocl driver pthread beside basic";

class WideBuilds {
 public:
  // One build: done once `binary` holds the program binary (or why there
  // is none).
  struct Build {
    std::atomic<bool> done{false};
    absl::StatusOr<std::string> binary = absl::UnavailableError("not built yet");
    std::string entry;
    // Its share of kad's host-memory guard while kept for later wants: a
    // client can make a binary of tens of MiB (a large constant array).
    std::shared_ptr<void> charge;
  };
  struct Stats {
    uint64_t built = 0;       // by compile workers
    uint64_t from_cache = 0;  // found in kad's code cache
    uint64_t failed = 0;
    uint64_t given = 0;       // binaries handed to session workers
    uint64_t kept_bytes = 0;  // of the binaries kept for later wants
  };

  explicit WideBuilds(WorkerPool& pool) : pool_(pool) {}
  ~WideBuilds();  // stops the build in progress (its compile worker) and the thread
  WideBuilds(const WideBuilds&) = delete;
  WideBuilds& operator=(const WideBuilds&) = delete;

  // The build for the wide device beside `device` (kad's own, which lowers
  // the code) of the kernel whose compile request is `request` (a serialized
  // worker.v1.Compile) and whose program binary's key is `key`: found in
  // the code cache (done at once), in progress, or queued now.
  std::shared_ptr<const Build> want(Device& device, const std::string& key,
                                    const std::string& entry,
                                    std::shared_ptr<const std::string> request);
  // A build was handed to a session's worker.
  void note_given();
  // Whether no build is queued or being made (for tests: a build's thread
  // allocates, and a count of a launch's allocations must not see it).
  bool idle() const;
  Stats stats() const;

 private:
  struct Job {
    Device* device;
    std::string key;
    std::shared_ptr<const std::string> request;
    std::shared_ptr<Build> build;
  };
  void run();
  absl::StatusOr<std::string> make(const Job& job);
  // Keeps a made build for the next wants, the kKept newest, each within
  // kad's host-memory guard (a build the guard refuses is not kept: later
  // wants find it in the code cache).
  void keep(const std::string& key, std::shared_ptr<Build> build)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  WorkerPool& pool_;
  StoppableBuild stoppable_;
  mutable absl::Mutex mu_;
  std::deque<Job> jobs_ ABSL_GUARDED_BY(mu_);
  // By key: builds queued or in progress, and the last kKept made, whose
  // binaries a later want takes without reading the cache.
  static constexpr size_t kKept = 16;
  absl::flat_hash_map<std::string, std::shared_ptr<Build>> builds_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> done_keys_ ABSL_GUARDED_BY(mu_);
  Stats stats_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  size_t unfinished_ ABSL_GUARDED_BY(mu_) = 0;  // builds queued or being made
  std::thread thread_;                          // started at the first build
};

}  // namespace kad::server::worker
