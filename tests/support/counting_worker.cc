// A kad worker that counts its heap allocations (DESIGN §7, §8): it serves
// its daemon as `kad --worker-fd 3 --worker-device ID` does (on PoCL's
// basic driver with a thread per queue, unless `--pocl-worker-driver=pthread`),
// and writes the allocations its serving thread and its queues' executors
// made outside driver calls to $KAD_WORKER_ALLOC_REPORT.<pid>: every 10 ms
// while it serves (a daemon kills a closing session's worker), and once
// more when the daemon hangs up. Started by tests/alloc/worker_alloc_test.cc
// through a WorkerPool, and by tests/alloc/shm_alloc_test.cc through a
// daemon (as a uid of its own under root).
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "backends/registry.h"
#include "core/driver_scope.h"
#include "server/worker/worker_main.h"
#include "server/worker/worker_pool.h"
#include "tests/support/alloc_counter.h"

// Its pid as the daemon sees it: in a PID namespace of its own getpid() is 1,
// but /proc is the host's, where /proc/self names the outer pid.
std::string pid_seen_by_daemon() {
  char link[32] = {};
  const ssize_t n = readlink("/proc/self", link, sizeof(link) - 1);
  return n > 0 ? std::string(link, n) : absl::StrCat(getpid());
}

int main(int argc, char** argv) {
  int fd = -1;
  std::string device_id;
  std::string worker_dir;
  bool on_basic = std::string(kad::server::worker::kDefaultPoclWorkerDriver) == "basic";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (absl::StartsWith(arg, "--worker-fd=") && !absl::SimpleAtoi(arg.substr(12), &fd)) return 2;
    if (absl::StartsWith(arg, "--worker-device=")) device_id = arg.substr(16);
    if (absl::StartsWith(arg, "--worker-dir=")) worker_dir = arg.substr(13);
    if (absl::StartsWith(arg, "--pocl-worker-driver="))
      on_basic = arg == "--pocl-worker-driver=basic";
  }
  if (fd < 0) return 2;
  if (on_basic) {  // as server/main.cc does
    setenv("POCL_DEVICES", "basic pthread", 1);
    device_id = "opencl:pocl:0";
  }
  kad::server::worker::harden_worker_process(fd);
  if (!worker_dir.empty()) {
    // As kad's workers do (server/main.cc): a worker with a uid of its own
    // (kad as root) has only its folder to write to.
    setenv("TMPDIR", worker_dir.c_str(), 1);
    kad::keep_driver_caches_in(worker_dir + "/driver-cache", /*specialize=*/false);
  }
  kad::DiscoveryConfig discovery;
  discovery.timed_queues = false;  // as kad's workers
  kad::DeviceRegistry registry = kad::discover_devices(discovery);
  kad::Device* device = registry.find(device_id);
  const absl::Status why = device != nullptr ? absl::OkStatus() : absl::NotFoundError(device_id);
  // The serving thread counts as the executors do (t_kad_service_thread):
  // one count for both, which the reporter reads from its own thread, whose
  // writes are not counted.
  kad::t_kad_service_thread = true;
  const kad::testing::AllocCounter counter;
  const char* report = std::getenv("KAD_WORKER_ALLOC_REPORT");
  const std::string path = report != nullptr ? absl::StrCat(report, ".", pid_seen_by_daemon()) : "";
  auto write_report = [&] {
    if (path.empty()) return;
    const std::string next = path + ".next";
    std::ofstream(next) << counter.counts().service_allocs << "\n";
    std::rename(next.c_str(), path.c_str());  // whole, for a reader at any time
  };
  std::atomic<bool> served{false};
  std::thread reporter([&] {
    while (!served.load()) {
      write_report();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  // Not confined: it writes its report where the test reads it.
  kad::Device* wide = on_basic ? registry.find("opencl:pocl:1") : nullptr;
  const int code = kad::server::worker::serve_worker(3, device, why, {}, on_basic, wide);
  served.store(true);
  reporter.join();
  write_report();
  return code;
}
