// A kad daemon inside the current process — engine, gRPC service on a UNIX
// socket and loopback TCP, shared-memory listener — for tests and benchmarks
// that count allocations on both sides while clients reach it over real sockets.
#pragma once

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backends/registry.h"
#include "server/daemon.h"
#include "server/worker/worker_pool.h"
#include "server/worker/worker_uids.h"

namespace kad::testing {

// The uids a root kad's workers run as, one range for every daemon in this
// process (two daemons with a range each would give two workers one uid).
inline std::shared_ptr<server::worker::WorkerUids> worker_uids_as_root() {
  static const std::shared_ptr<server::worker::WorkerUids> uids =
      geteuid() == 0 ? server::worker::WorkerUids::create(server::worker::kDefaultWorkerUidBase)
                     : nullptr;
  return uids;
}

class InProcessDaemon {
 public:
  // `workers`: kernels on CPU devices run in worker processes started from
  // the kad executable (KAD_DAEMON_PATH), as kad runs them by default (under
  // root, each as a uid of its own); otherwise in this process.
  // `device_queue_depth`: --device-queue-depth (0: launches go straight to
  // the device, unscheduled). `submit_streams`: --submit-streams.
  // `pocl_worker_driver`: --pocl-worker-driver. `worker_executable`: the
  // workers' executable, where not this build's kad (another build's, to
  // compare them). `shm_direct`: --shm-direct.
  explicit InProcessDaemon(
      const std::string& name, bool workers = false,
      uint32_t device_queue_depth = server::EngineLimits{}.device_queue_depth,
      server::SubmitStreams submit_streams = server::SubmitStreams::kThreads,
      const std::string& pocl_worker_driver = server::worker::kDefaultPoclWorkerDriver,
      const std::string& worker_executable = "", bool shm_direct = false) {
    socket_ = absl::StrFormat("/tmp/kad-%s-%d.sock", name, getpid());
    server::DaemonOptions options;
    options.limits.device_queue_depth = device_queue_depth;
    options.limits.shm_direct = shm_direct;
    options.submit_streams = submit_streams;
    options.listen = {"unix:" + socket_, "tcp://127.0.0.1:0"};
#ifdef KAD_DAEMON_PATH
    if (workers) {
      options.workers.command = {
          .executable = worker_executable.empty() ? KAD_DAEMON_PATH : worker_executable,
          .args = {},
          .uids = worker_uids_as_root()};
      server::worker::set_pocl_worker_driver(options.workers, pocl_worker_driver);
    }
#else
    (void)workers;
    (void)pocl_worker_driver;
    (void)worker_executable;
#endif
    auto d = server::Daemon::start(discover_devices(), std::move(options));
    if (d.ok()) daemon_ = *std::move(d);
  }

  bool serving() const { return daemon_ != nullptr && daemon_->shm_listeners().size() == 1; }
  // "shm", "grpc-unix" or "grpc-tcp".
  std::string uri(const std::string& mode) const {
    if (mode == "shm") return "unix:" + socket_ + "?transport=shm";
    if (mode == "grpc-unix") return "unix:" + socket_ + "?transport=grpc";
    return daemon_->uris()[1];
  }
  server::ShmListener& shm() { return *daemon_->shm_listeners()[0]; }

 private:
  std::string socket_;
  std::unique_ptr<server::Daemon> daemon_;
};

}  // namespace kad::testing
