// kad: the device launch service daemon. Owns the machine's devices and the
// compiled-kernel cache, and serves kad.v1 over gRPC on UNIX sockets and TCP.
// SIGTERM (or SIGINT) drains: in-flight launches finish, new ones are
// refused, then it exits 0.
#include <malloc.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "backends/registry.h"
#include "core/kernel_lowering.h"
#include "server/config.h"
#include "server/daemon.h"
#include "server/json_log_format.h"
#include "server/service_manager.h"
#include "server/worker/worker_main.h"
#include "server/worker/worker_uids.h"
#include "spdlog/spdlog.h"

namespace {

using kad::server::Config;

void write_ready_file(const std::string& path, const std::vector<std::string>& uris) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    for (const auto& u : uris) out << u << "\n";
  }
  std::filesystem::rename(tmp, path);
}

// The kernel toolchain and its code cache, the same way in the daemon and in
// its workers.
void start_lowering(const Config& config) {
  if (!config.toolchain_version.empty()) {
    kad::KernelLowering::configure_known_toolchain_version(config.toolchain_version);
  }
  if (config.cache_dir) {
    kad::KernelLowering::configure_shared_cache(*config.cache_dir, config.cache_max_bytes);
  }
  kad::KernelLowering::shared().set_limits({.seconds = config.compile_timeout_s,
                                            .memory_bytes = config.compile_memory_mib << 20,
                                            .output_bytes = kad::ToolchainLimits{}.output_bytes});
}

kad::DeviceRegistry start_devices(const Config& config) {
  start_lowering(config);
  // Drivers' own caches beside kad's code cache (or in the temporary
  // folder without one), not in a home a service's user does not have.
  const kad::CodeCache& cache = kad::KernelLowering::shared().cache();
  std::error_code error;
  const std::string beside_code = cache.folder() + "/drivers";
  if (cache.enabled() && (std::filesystem::create_directories(beside_code, error), !error)) {
    kad::default_driver_caches_to(beside_code);
  } else {
    const char* tmp = std::getenv("TMPDIR");
    kad::default_driver_caches_to(
        absl::StrCat(tmp != nullptr && *tmp ? tmp : "/tmp", "/kad-drivers-", geteuid()));
  }
  return kad::discover_devices({.cuda_prefer_blocks = config.cuda_prefer_blocks,
                                .only_backend = {},
                                .null_device = config.null_device});
}

// `kad --worker-fd 3 --worker-device ID --worker-dir DIR`: runs client
// kernels for the daemon that started it (DESIGN §8), behind its walls from
// before the driver starts a thread to the end.
int serve_as_worker(Config config) {
  namespace worker = kad::server::worker;
  worker::harden_worker_process(config.worker_fd);
  // Its memory bound, before anything a client sent: kad set it before the
  // exec where it started the worker in namespaces of its own, but not
  // where it could not (posix_spawn sets no limits). Only ever lowered.
  if (const rlim_t bound = config.worker_max_memory; bound > 0) {
    rlimit data{};
    if (getrlimit(RLIMIT_DATA, &data) == 0 &&
        (data.rlim_max == RLIM_INFINITY || data.rlim_max > bound)) {
      data = {bound, bound};
      setrlimit(RLIMIT_DATA, &data);
    }
  }
  if (!config.worker_dir.empty()) {
    setenv("TMPDIR", config.worker_dir.c_str(), 1);
    kad::keep_driver_caches_in(config.worker_dir + "/driver-cache", config.worker_specialize);
  }
  // A code cache of its own, for the code the daemon sends with a compile
  // (never kad's, which holds every tenant's code); none without a folder.
  config.cache_dir = config.worker_dir.empty() ? "" : config.worker_dir + "/code-cache";
  start_lowering(config);
  absl::StatusOr<worker::Confinement> walls =
      worker::confine_worker(worker::worker_sandbox(config.worker_dir), config.worker_dir);
  if (!walls.ok()) return worker::serve_worker(3, nullptr, walls.status(), {});
  // PoCL's CPU device on the driver kad was told (--pocl-worker-driver),
  // chosen before PoCL starts: then the only device of PoCL's platform.
  // On basic, PoCL's pthread driver too, second: the wide device on which
  // a queue's long launches of several work-groups get every core
  // (launch_executor.h).
  std::string device_id = config.worker_device;
  bool kernels_run_in_enqueue = false;
  if (config.pocl_worker_driver != "pthread" && absl::StartsWith(device_id, "opencl:pocl:")) {
    kernels_run_in_enqueue = config.pocl_worker_driver == "basic";
    setenv("POCL_DEVICES",
           kernels_run_in_enqueue ? "basic pthread" : config.pocl_worker_driver.c_str(), 1);
    device_id = "opencl:pocl:0";
  }
  kad::DeviceRegistry registry =
      kad::discover_devices({.cuda_prefer_blocks = config.cuda_prefer_blocks,
                             .only_backend = device_id.substr(0, device_id.find(':')),
                             .null_device = false,
                             // Nobody asks a worker's queues for device times.
                             .timed_queues = false});
  kad::Device* device = registry.find(device_id);
  const absl::Status why =
      device != nullptr ? absl::OkStatus()
                        : absl::NotFoundError(absl::StrCat(
                              "no device has id `", config.worker_device, "` in this worker"));
  kad::Device* wide = kernels_run_in_enqueue ? registry.find("opencl:pocl:1") : nullptr;
  return worker::serve_worker(3, device, why, *walls, kernels_run_in_enqueue, wide);
}

int serve(Config config) {
  // What kad makes is its own (code cache, workers' folders, sockets until
  // they get --socket-mode): set before any thread starts, as the umask is
  // the whole process's.
  umask(0077);
  // Block the stop signals in every thread; main waits for them with sigwait.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGHUP);  // reloads --tokens
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  // Read (and taken out of the environment) before any thread starts.
  absl::StatusOr<kad::server::ServiceManagerNotifier> service_manager =
      kad::server::ServiceManagerNotifier::from_environment();
  if (!service_manager.ok()) {
    spdlog::warn("{}: the service manager is not told when kad serves",
                 std::string(service_manager.status().message()));
    service_manager = kad::server::ServiceManagerNotifier();
  }
  auto tell_service_manager = [&](const std::string& state) {
    if (absl::Status s = service_manager->notify(state); !s.ok())
      spdlog::warn("{}", std::string(s.message()));
  };

  kad::DeviceRegistry registry = start_devices(config);
  {
    kad::KernelLowering& lowering = kad::KernelLowering::shared();
    const kad::CodeCache& cache = lowering.cache();
    absl::Status toolchain = lowering.toolchain_status();
    spdlog::info("kernel toolchain: {}; code cache: {}",
                 toolchain.ok() ? lowering.version() : std::string(toolchain.message()),
                 cache.enabled() ? cache.folder() : std::string("off (memory only)"));
    if (absl::Status sandbox = kad::tool_sandbox_support(); !sandbox.ok())
      spdlog::warn("{}: compilers run unconfined, behind the source checks alone",
                   std::string(sandbox.message()));
  }
  for (const std::string& line : registry.log) spdlog::info("{}", line);
  if (registry.devices.empty()) spdlog::warn("no device found: kad serves, but cannot launch");
  for (const auto& d : registry.devices) {
    const kad::DeviceInfo& i = d->info();
    spdlog::info("device {}: {} ({}), max workgroup {}, {} compute units, {} MiB{}", i.id, i.name,
                 i.platform, i.limits.max_workgroup_size, i.limits.compute_units,
                 i.limits.global_memory_bytes >> 20,
                 d.get() == registry.default_device() ? " [default]" : "");
  }

  if (config.workers) {
    std::error_code error;
    const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
    if (error) {
      spdlog::error("cannot find kad's own executable to start workers: {}", error.message());
      return 2;
    }
    kad::server::worker::WorkerOptions& w = config.daemon.workers;
    w.command = {.executable = self.string(),
                 .args = kad::server::worker_args(config),
                 .max_processes = config.worker_max_processes,
                 .max_folder_bytes = config.worker_max_folder_bytes,
                 .max_data_bytes = config.worker_max_memory};
    if (getuid() == 0 && config.worker_uid_base != 0) {
      // A uid of its own per worker, if such a uid may run kad at all.
      const uid_t base = config.worker_uid_base;
      absl::Status may =
          kad::server::worker::check_uids_unused(base, kad::server::worker::kWorkerUidCount);
      if (may.ok()) may = kad::server::worker::check_uid_may_run(base, self.string());
      if (may.ok()) {
        w.command.uids = kad::server::worker::WorkerUids::create(base);
        spdlog::info("workers run as uids of their own, one each, from {} to {}", base,
                     base + (kad::server::worker::kWorkerUidCount - 1));
      } else {
        spdlog::warn("workers run as root: {} (--worker-uid-base)", std::string(may.message()));
      }
    }
    if (getuid() == 0 && !w.command.uids && config.worker_max_processes > 0) {
      spdlog::warn(
          "kad's workers run as root: Linux holds no process of root's to "
          "--worker-max-processes, so a client's code can fork-bomb the machine; let workers run "
          "as uids of their own (--worker-uid-base), or run kad as a user of its own (deploy/)");
    }
    w.launch_timeout = absl::Seconds(config.launch_timeout_s);
    // Each compiler run has --compile-timeout; the driver's build follows.
    w.compile_timeout = absl::Seconds(2 * config.compile_timeout_s + 30);
    w.spares = config.worker_spares;
    w.scope = config.worker_scope == "device" ? kad::server::worker::WorkerScope::kDevice
                                              : kad::server::worker::WorkerScope::kSession;
    kad::server::worker::set_pocl_worker_driver(w, config.pocl_worker_driver);
    if (config.worker_malloc == "tcmalloc") {
      w.command.preload = kad::server::worker::tcmalloc_library();
      if (w.command.preload.empty()) {
        spdlog::warn(
            "workers allocate with glibc's malloc: --worker-malloc tcmalloc, but "
            "libtcmalloc_minimal.so.4 is not installed (Debian: libtcmalloc-minimal4)");
      } else {
        spdlog::info("workers allocate with tcmalloc ({}; --worker-malloc)", w.command.preload);
      }
    }
    if (w.kernels_hold_requests) {
      spdlog::info(
          "PoCL's kernels run on PoCL's basic driver in their workers' own threads, and those of "
          "several work-groups measured faster on every core on its pthread driver beside it "
          "(--pocl-worker-driver)");
    }
    if (w.scope == kad::server::worker::WorkerScope::kDevice) {
      spdlog::warn(
          "client kernels on CPU devices run in one worker process per device, shared by every "
          "session on it (--worker-scope device): one session's kernel can read another's "
          "memory, and a crash or a hang there costs every session its launches in progress; "
          "launch timeout {} s",
          config.launch_timeout_s);
    } else {
      spdlog::info(
          "client kernels on CPU devices run in worker processes, one per session; "
          "launch timeout {} s",
          config.launch_timeout_s);
    }
  } else {
    spdlog::warn(
        "--no-workers: client kernels run inside kad; one client's kernel can crash or "
        "hang the daemon for everyone");
  }
  absl::StatusOr<std::unique_ptr<kad::server::Daemon>> daemon =
      kad::server::Daemon::start(std::move(registry), config.daemon);
  if (!daemon.ok()) {
    spdlog::error("{}", std::string(daemon.status().message()));
    return daemon.status().code() == absl::StatusCode::kUnavailable ? 1 : 2;
  }
  for (const std::string& uri : (*daemon)->uris()) spdlog::info("listening on {}", uri);
  for (const auto& l : (*daemon)->shm_listeners())
    spdlog::info("shared memory for unix:{} on {}", l->path().substr(0, l->path().size() - 4),
                 l->path());
  std::vector<std::string> ready = (*daemon)->uris();
  if (const std::string metrics = (*daemon)->metrics_url(); !metrics.empty()) {
    spdlog::info("metrics on {}", metrics);
    ready.push_back(metrics);
  }
  if (!config.ready_file.empty()) write_ready_file(config.ready_file, ready);
  const std::string serving =
      absl::StrCat("READY=1\nSTATUS=serving on ", absl::StrJoin((*daemon)->uris(), ", "));
  tell_service_manager(serving);

  int signal = 0;
  for (sigwait(&stop, &signal); signal == SIGHUP; sigwait(&stop, &signal)) {
    tell_service_manager("RELOADING=1\nSTATUS=reading the bearer tokens again");
    if (absl::Status s = (*daemon)->reload_tokens(); !s.ok()) {
      spdlog::error("SIGHUP: {}; the tokens in force stay", std::string(s.message()));
    } else {
      spdlog::info("SIGHUP: bearer tokens read again");
    }
    tell_service_manager(serving);
  }
  tell_service_manager(
      "STOPPING=1\nSTATUS=draining: in-flight launches finish, new ones are refused");
  spdlog::info("{}: draining (in-flight launches finish, new ones are refused)",
               signal == SIGTERM ? "SIGTERM" : "SIGINT");
  if (!(*daemon)->drain(config.daemon.limits.finish_timeout)) {
    // A kernel that never ends holds a driver thread no call can interrupt:
    // the process ends without it, within the drain timeout.
    spdlog::warn("launches still run after the drain timeout ({} s): exiting without them",
                 absl::ToInt64Seconds(config.daemon.limits.finish_timeout));
    (*daemon)->remove_socket_files();
    spdlog::shutdown();
    _exit(0);
  }
  // Queues are finished: give replies in flight a moment, then cancel the
  // streams clients keep open.
  (*daemon)->shutdown(absl::Seconds(1));
  spdlog::info("stopped");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Debian's abseil checks every Mutex acquisition for lock-order cycles
  // (a debug aid, about 3 % of a pipelined launch's CPU in kad's threads);
  // the test suites keep it on.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // A transfer moves 1 MiB chunks through gRPC's and protobuf's buffers.
  // glibc would map each such block fresh and unmap it on free, and the
  // kernel would zero its pages again every time (a third of a large write's
  // time in kad). Blocks up to 32 MiB come from the heap instead, and up to
  // 64 MiB of freed heap per arena is kept for the next chunk.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
  kad::server::ParseOutcome parsed = kad::server::parse_config(argc, argv);
  if (parsed.exit) {
    std::fprintf(parsed.exit_code == 0 ? stdout : stderr, "%s\n", parsed.message.c_str());
    return parsed.exit_code;
  }
  spdlog::set_level(spdlog::level::from_str(parsed.config.log_level));
  const bool worker = parsed.config.worker_fd >= 0;
  if (parsed.config.log_format == "json") {
    spdlog::set_formatter(kad::server::json_log_formatter(worker ? "kad worker" : "kad"));
  } else {
    spdlog::set_pattern(worker ? "%Y-%m-%dT%H:%M:%S.%e kad worker %l: %v"
                               : "%Y-%m-%dT%H:%M:%S.%e kad %l: %v");
  }
  if (worker) return serve_as_worker(parsed.config);
  return serve(std::move(parsed.config));
}
