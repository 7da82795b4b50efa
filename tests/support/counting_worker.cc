// A kad worker that counts its heap allocations (DESIGN §7, §8): it serves
// its daemon as `kad --worker-fd 3 --worker-device ID` does (on PoCL's
// basic driver with a thread per queue, unless `--pocl-worker-driver=pthread`),
// and when the daemon hangs up writes the allocations its serving thread and
// its queues' executors made outside driver calls to
// $KAD_WORKER_ALLOC_REPORT.<pid>. Started by tests/alloc/worker_alloc_test.cc
// through a WorkerPool.
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "backends/registry.h"
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
  bool on_basic = std::string(kad::server::worker::kDefaultPoclWorkerDriver) == "basic";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (absl::StartsWith(arg, "--worker-fd=") && !absl::SimpleAtoi(arg.substr(12), &fd)) return 2;
    if (absl::StartsWith(arg, "--worker-device=")) device_id = arg.substr(16);
    if (absl::StartsWith(arg, "--pocl-worker-driver="))
      on_basic = arg == "--pocl-worker-driver=basic";
  }
  if (fd < 0) return 2;
  if (on_basic) {  // as server/main.cc does
    setenv("POCL_DEVICES", "basic pthread", 1);
    device_id = "opencl:pocl:0";
  }
  kad::server::worker::harden_worker_process(fd);
  kad::DeviceRegistry registry = kad::discover_devices({});
  kad::Device* device = registry.find(device_id);
  const absl::Status why = device != nullptr ? absl::OkStatus() : absl::NotFoundError(device_id);
  const kad::testing::AllocCounter counter;
  // Not confined: it writes its report where the test reads it.
  kad::Device* wide = on_basic ? registry.find("opencl:pocl:1") : nullptr;
  const int code = kad::server::worker::serve_worker(3, device, why, {}, on_basic, wide);
  // The executors are kad's service threads (t_kad_service_thread).
  const kad::testing::AllocCounts counts = counter.counts();
  const uint64_t allocs = counts.kad_allocs + counts.service_allocs;
  if (const char* report = std::getenv("KAD_WORKER_ALLOC_REPORT")) {
    std::ofstream(absl::StrCat(report, ".", pid_seen_by_daemon())) << allocs << "\n";
  }
  return code;
}
