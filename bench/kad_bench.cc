// kad's benchmark suite (issue "Benchmark suite"): KernelAbstractions' names,
// each in every mode, side by side in one run:
//   raw/        the driver called directly — no kad code, the floor
//               (raw_opencl_runner.cc, raw_cuda_runner.cc)
//   inproc/     kad's pipeline in this process
//   shm/        a kad daemon over shared memory
//   grpc-unix/  a kad daemon over gRPC on a UNIX socket
//   grpc-tcp/   a kad daemon over gRPC on loopback TCP
// The daemon runs in this process (its engine, gRPC server and shared-memory
// listener) and clients reach it over real sockets, so that allocations on
// both sides are counted: kad_allocs / kad_bytes (this thread and kad's
// service threads, outside driver calls) and total_allocs / total_bytes
// (everything, drivers and gRPC included), per iteration.
//
// --profile=quick (default) or --profile=full chooses the sizes.
//
// KAD_BENCH_DEVICE=<kad device id> (cuda:0, opencl:pocl:0, ...) runs every
// mode on that device: inproc/ finds it in the registry, the client modes open
// their queues and buffers on it (the in-process daemon owns every device),
// worker processes inherit the variable, and raw/ calls that device's own
// driver: OpenCL for an OpenCL device, the CUDA Driver API for a CUDA device
// (the same raw kernels, lowered to PTX through kad's on-disk cache; no kad
// code in the timed path). Unset: the registry's default device, as before.
// The device is recorded in the results' context (kad_device, ...).
//
// --prepare_gpu_cache lowers every raw kernel the chosen profile uses to PTX
// (kRawPtxTarget) into the on-disk cache (KAD_CACHE_DIR) and exits, so that a
// GPU machine without kad's toolchain can run raw/ on CUDA. No GPU needed.
#include <benchmark/benchmark.h>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <numeric>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "backends/registry.h"
#include "bench/client_runner.h"
#include "bench/delay_proxy.h"
#include "bench/grpc_floor.h"
#include "bench/raw_basic_twin.h"
#include "bench/runner.h"
#include "core/driver_scope.h"
#include "core/kernel.h"
#include "core/kernel_lowering.h"
#include "core/launch.h"
#include "core/module.h"
#include "core/partition.h"
#include "kad/client.h"
#include "server/engine.h"
#include "server/kad_service.h"
#include "server/shm_listener.h"
#include "server/tenants.h"
#include "tests/support/alloc_counter.h"
#include "tests/support/daemon.h"
#include "tests/support/in_process_daemon.h"

namespace {

using kad_bench::ClientRunner;
using kad_bench::DelayProxy;
using kad_bench::first_launch_work;
using kad_bench::kRawPtxTarget;
using kad_bench::raw_ptx;
using kad_bench::requested_device_id;
using kad_bench::Runner;
using kad_bench::Shape;
using kad_bench::start_tcp_echo;
using kad_bench::tcp_round_trip;
using kad_bench::Work;

bool g_full = false;
std::string g_self;  // this binary, re-executed as a worker
// --benchmark_min_time=..., as given (empty: none), for the child runs of
// raw-basic/.
std::string g_min_time_flag;

// ---- the device ------------------------------------------------------------------------------

kad::DeviceRegistry& registry() {
  static auto* r = new kad::DeviceRegistry(kad::discover_devices());
  return *r;
}

// The device every mode runs on, resolved once by choose_device().
kad::Device* g_device = nullptr;

// Finds the device KAD_BENCH_DEVICE names (or the default one); an unknown id
// is an error naming it, the devices found and why backends found none.
absl::Status choose_device() {
  const std::string id = requested_device_id();
  kad::DeviceRegistry& r = registry();
  g_device = id.empty() ? r.default_device() : r.find(id);
  if (g_device != nullptr) return absl::OkStatus();
  std::vector<std::string> found;
  for (const auto& d : r.devices) {
    found.push_back(
        absl::StrFormat("%s \"%s\" (%s)", d->info().id, d->info().name, d->info().backend));
  }
  return absl::NotFoundError(absl::StrFormat(
      "%s; devices found: %s\ndiscovery log:\n  %s",
      id.empty() ? std::string("no device found for the benchmarks")
                 : absl::StrCat("KAD_BENCH_DEVICE=", id, " names no device on this machine"),
      found.empty() ? std::string("none") : absl::StrJoin(found, ", "),
      r.log.empty() ? std::string("(empty)") : absl::StrJoin(r.log, "\n  ")));
}

// ---- one runner per mode -------------------------------------------------------------

// raw/ on a backend with no raw twin yet: every raw/ case says so.
class NoRawRunner final : public Runner {
 public:
  explicit NoRawRunner(std::string why) : why_(std::move(why)) {}
  absl::Status setup(const Work&) override { return absl::UnimplementedError(why_); }
  absl::Status launch() override { return absl::UnimplementedError(why_); }
  absl::Status wait() override { return absl::UnimplementedError(why_); }

 private:
  std::string why_;
};

// The raw runner for the chosen device's backend.
std::unique_ptr<Runner> raw_runner() {
  if (requested_device_id().empty() || g_device == nullptr)
    return kad_bench::make_opencl_raw_runner(nullptr);  // as before
  const kad::DeviceInfo& info = g_device->info();
  if (info.backend == "opencl") return kad_bench::make_opencl_raw_runner(&info);
  int ordinal = -1;
  if (info.backend == "cuda" && absl::StartsWith(info.id, "cuda:") &&
      absl::SimpleAtoi(absl::string_view(info.id).substr(5), &ordinal)) {
    return kad_bench::make_cuda_raw_runner(ordinal);
  }
  return std::make_unique<NoRawRunner>(
      absl::StrFormat("raw/ has no raw driver twin for %s (backend %s): only OpenCL and CUDA",
                      info.id, info.backend));
}

class InprocRunner final : public Runner {
 public:
  absl::Status setup(const Work& w) override {
    if (g_device == nullptr) return absl::FailedPreconditionError("no device chosen");
    kad::Device& device = *g_device;
    auto q = device.create_queue();
    if (!q.ok()) return q.status();
    queue_ = *std::move(q);
    auto m = kad::Module::create(kad::ModuleFormat::kOpenClC, w.source(false));
    if (!m.ok()) return m.status();
    const kad::ScalarType t = w.double_scalar() ? kad::ScalarType::kF64 : kad::ScalarType::kF32;
    kad::KernelSignature sig{w.kernel, std::nullopt, std::nullopt, {}, ""};
    for (char c : w.layout()) {
      sig.args.push_back(c == 'B'   ? kad::ArgSpec::buffer()
                         : c == 'C' ? kad::ArgSpec::const_buffer()
                                    : kad::ArgSpec::scalar_of(t));
    }
    for (int64_t e : w.shape.ndrange) range_.extents.v[range_.extents.rank++] = e;
    range_.offsets = kad::Dims::filled(range_.extents.rank, 0);
    for (int64_t e : w.shape.workgroup) workgroup_.v[workgroup_.rank++] = e;
    if (w.shape.static_ndrange) sig.static_ndrange = range_;
    if (w.shape.static_workgroup) sig.static_workgroup = workgroup_;
    auto k = kad::Kernel::create(*m, sig);
    if (!k.ok()) return k.status();
    kernel_ = *std::move(k);
    for (char c : w.layout()) {
      if (c == 'S') {
        args_.push_back(t == kad::ScalarType::kF64 ? kad::KernelArg::of_scalar(2.0)
                                                   : kad::KernelArg::of_scalar(2.0f));
        continue;
      }
      auto b = device.allocate(static_cast<uint64_t>(w.items()) * w.element_bytes());
      if (!b.ok()) return b.status();
      buffers_.push_back(*std::move(b));
      args_.push_back(kad::KernelArg::of_buffer(*buffers_.back()));
    }
    request_ = {w.shape.static_ndrange ? nullptr : &range_,
                w.shape.give_workgroup ? &workgroup_ : nullptr, args_};
    return absl::OkStatus();
  }
  absl::Status launch() override {
    auto r = kad::launch(*kernel_, *queue_, cache_, request_);
    if (!r.ok()) return r.status();
    last_ = r->event;
    return absl::OkStatus();
  }
  absl::Status wait() override { return queue_->wait(last_); }

 private:
  std::unique_ptr<kad::Queue> queue_;
  std::unique_ptr<kad::Kernel> kernel_;
  std::vector<std::unique_ptr<kad::Buffer>> buffers_;
  std::vector<kad::KernelArg> args_;
  kad::NdRange range_;
  kad::Dims workgroup_;
  kad::LaunchRequest request_;
  kad::KernelCache cache_;
  kad::EventId last_ = 0;
};

// The daemons of the client modes, in this process: kernels run in it
// (shm, grpc-unix, grpc-tcp) or in worker processes it starts, as kad does
// by default (worker-shm, worker-grpc-unix: the worker hop of DESIGN §8).
// KAD_BENCH_DEVICE_QUEUE_DEPTH: the daemon's --device-queue-depth, to
// measure the fair-share scheduler's cost on the launch path (0: off).
uint32_t bench_queue_depth() {
  uint32_t depth = kad::server::EngineLimits{}.device_queue_depth;
  if (const char* e = std::getenv("KAD_BENCH_DEVICE_QUEUE_DEPTH"))
    (void)absl::SimpleAtoi(e, &depth);
  return depth;
}

// KAD_BENCH_SUBMIT_STREAMS=reactors: both daemons serve Submit streams as
// reactors (--submit-streams reactors).
kad::server::SubmitStreams bench_submit_streams() {
  const char* e = std::getenv("KAD_BENCH_SUBMIT_STREAMS");
  return e != nullptr && std::string_view(e) == "reactors" ? kad::server::SubmitStreams::kReactors
                                                           : kad::server::SubmitStreams::kThreads;
}

// KAD_BENCH_POCL_WORKER_DRIVER=pthread: the daemon with workers runs them on
// PoCL's pthread driver (--pocl-worker-driver pthread), not kad's default.
std::string bench_pocl_worker_driver() {
  const char* e = std::getenv("KAD_BENCH_POCL_WORKER_DRIVER");
  return e != nullptr ? e : kad::server::worker::kDefaultPoclWorkerDriver;
}

// KAD_BENCH_KAD=PATH: the kad executable the daemons with workers start as
// workers (another build's, to compare workers in one kad_bench: bench/ab.sh);
// unset: this build's.
std::string bench_worker_executable() {
  const char* e = std::getenv("KAD_BENCH_KAD");
  return e != nullptr ? e : KAD_DAEMON_PATH;
}

// Whether the daemon with workers lends shared-memory channels to them
// (--shm-direct: the direct path): kad's default, or KAD_BENCH_SHM_DIRECT=1
// / =0 (kad's own path, as --no-shm-direct).
bool bench_shm_direct() {
  const char* e = std::getenv("KAD_BENCH_SHM_DIRECT");
  if (e == nullptr) return kad::server::EngineLimits{}.shm_direct;
  return std::string_view(e) == "1";
}

// The bench's two daemons, made at first use and stopped by main before it
// returns: left to the process's exit, a worker pool's thread could still
// log (a spare that started late) after spdlog's own statics were gone.
kad::testing::InProcessDaemon*& daemon_slot(bool workers) {
  static kad::testing::InProcessDaemon* daemons[2] = {nullptr, nullptr};
  return daemons[workers ? 1 : 0];
}

kad::testing::InProcessDaemon& daemon(bool workers = false) {
  static std::once_flag made;
  std::call_once(made, [] {
    daemon_slot(false) = new kad::testing::InProcessDaemon("bench", false, bench_queue_depth(),
                                                           bench_submit_streams());
    daemon_slot(true) = new kad::testing::InProcessDaemon(
        "bench-workers", /*workers=*/true, kad::server::EngineLimits{}.device_queue_depth,
        bench_submit_streams(), bench_pocl_worker_driver(), bench_worker_executable(),
        bench_shm_direct());
  });
  return *daemon_slot(workers);
}

void stop_daemons() {
  for (bool workers : {false, true}) {
    delete daemon_slot(workers);
    daemon_slot(workers) = nullptr;
  }
}

// A client mode's URI: "worker-shm" is "shm" on the daemon with workers.
std::string uri_for(const std::string& mode) {
  if (absl::StartsWith(mode, "worker-")) return daemon(true).uri(mode.substr(7));
  return daemon().uri(mode);
}

std::unique_ptr<Runner> runner_for(const std::string& mode) {
  if (mode == "raw") return raw_runner();
  if (mode == "inproc") return std::make_unique<InprocRunner>();
  return std::make_unique<ClientRunner>(uri_for(mode));
}

const std::vector<std::string> kModes = {"raw", "inproc", "shm", "grpc-unix", "grpc-tcp"};
// The worker hop, beside the modes above in launch/, pipelined/,
// time_to_load and concurrency/.
const std::vector<std::string> kWorkerModes = {"worker-shm", "worker-grpc-unix"};

// What the registered raw/ cases launch: --prepare_gpu_cache lowers these.
std::vector<Work> g_raw_works;

void note_work(const std::string& mode, const Work& w) {
  if (mode == "raw") g_raw_works.push_back(w);
}

// ---- measuring -------------------------------------------------------------------------

void report_allocs(benchmark::State& state, const kad::testing::AllocCounts& c) {
  const double n = static_cast<double>(state.iterations());
  state.counters["kad_allocs"] = static_cast<double>(c.kad_allocs + c.service_allocs) / n;
  state.counters["kad_bytes"] = static_cast<double>(c.kad_bytes) / n;
  state.counters["total_allocs"] = static_cast<double>(c.total_allocs) / n;
  state.counters["total_bytes"] = static_cast<double>(c.total_bytes) / n;
}

constexpr std::chrono::milliseconds kWorkerWarmUp{1500};
constexpr int kWorkerWarmUpLaunches = 10000;

// Synchronous: launch and wait, each iteration (Queue::run: one round trip).
void run_sync(benchmark::State& state, const std::string& mode, const Work& w) {
  auto runner = runner_for(mode);
  if (absl::Status s = runner->setup(w); !s.ok()) return state.SkipWithError(s.ToString().c_str());
  for (int i = 0; i < 3; ++i) {
    if (!runner->run().ok()) return state.SkipWithError("warm-up failed");
  }
  // Through a worker on PoCL's basic driver, a kernel of 200 µs or more on
  // one core may move to every core once its build for PoCL's pthread is
  // made, on a thread of its own beside its first launches (some 0.5 s;
  // server/worker/wide_choice.h). Each run here is a new session, so the
  // warm-up is meant to outlast that build (on a busy 2-core machine it
  // may take longer, and a long kernel's figures then include some of it:
  // bench/results/2026-12-04-measured-wide-choice); short launches end it
  // after kWorkerWarmUpLaunches.
  if (absl::StartsWith(mode, "worker-")) {
    const auto until = std::chrono::steady_clock::now() + kWorkerWarmUp;
    for (int i = 0; i < kWorkerWarmUpLaunches && std::chrono::steady_clock::now() < until; ++i) {
      if (!runner->run().ok()) return state.SkipWithError("warm-up failed");
    }
  }
  kad::testing::AllocCounter counter;
  for (auto _ : state) {
    if (!runner->run().ok()) return state.SkipWithError("launch failed");
  }
  report_allocs(state, counter.counts());
}

// raw/`raw_case` in a child kad_bench on PoCL's basic (raw_basic_twin.h);
// its time per iteration, as this case's manual time.
void run_raw_basic(benchmark::State& state, const std::string& raw_case) {
  for (auto _ : state) {
    absl::StatusOr<kad_bench::TwinResult> r =
        kad_bench::run_raw_case_on_basic(g_self, raw_case, g_min_time_flag);
    if (!r.ok()) return state.SkipWithError(r.status().ToString().c_str());
    state.SetIterationTime(r->seconds_per_iteration);
    if (r->items_per_second > 0) state.counters["items_per_second"] = r->items_per_second;
    state.SetLabel("on " + r->device_name);
  }
}

// Pipelined: `batch` launches submitted without waiting, then one wait;
// items/s is launches per second.
void run_pipelined(benchmark::State& state, const std::string& mode, const Work& w, int batch) {
  auto runner = runner_for(mode);
  if (absl::Status s = runner->setup(w); !s.ok()) return state.SkipWithError(s.ToString().c_str());
  // Warm up as run_sync does, so that compiling is never timed or counted.
  for (int i = 0; i < 3; ++i) {
    if (!runner->launch().ok() || !runner->wait().ok())
      return state.SkipWithError("warm-up failed");
  }
  kad::testing::AllocCounter counter;
  for (auto _ : state) {
    for (int i = 0; i < batch; ++i) {
      if (!runner->launch().ok()) return state.SkipWithError("launch failed");
    }
    if (!runner->wait().ok()) return state.SkipWithError("wait failed");
  }
  state.SetItemsProcessed(state.iterations() * batch);
  report_allocs(state, counter.counts());
}

void run_ping(benchmark::State& state, const std::string& mode) {
  auto runner = runner_for(mode);
  Work w{"scale", "float", {{16}, {}, false, false, false}};
  if (absl::Status s = runner->setup(w); !s.ok()) return state.SkipWithError(s.ToString().c_str());
  kad::testing::AllocCounter counter;
  for (auto _ : state) {
    if (!runner->ping().ok()) return state.SkipWithError("ping failed");
  }
  report_allocs(state, counter.counts());
}

// grpc-tcp-1ms/: kad over TCP through a link with a 1 ms round trip
// (delay_proxy.h), to count round trips per operation: round_trips is the
// time per operation over the link's own round trip (a plain TCP ping-pong
// through the same proxy, link_rtt_us).
// grpc-tcp-netem-1ms/ (KAD_BENCH_LINK=netem, bench/run.sh --netem): the same
// cases where the kernel delays the loopback itself (netem, 500 µs each way,
// in a network namespace run.sh makes): no proxy, kad's port as it is.
bool netem_link() {
  const char* link = std::getenv("KAD_BENCH_LINK");
  return link != nullptr && std::string_view(link) == "netem";
}

struct DelayedLink {
  std::string uri;
  double rtt_s = 0;
};

const DelayedLink* delayed_link() {
  static const DelayedLink* link = []() -> const DelayedLink* {
    const std::string tcp = daemon().uri("grpc-tcp");  // tcp://127.0.0.1:PORT
    auto echo = start_tcp_echo();
    if (!echo.ok()) return nullptr;
    if (netem_link()) {  // every loopback packet is delayed already
      auto rtt = tcp_round_trip(*echo, 50);
      if (!rtt.ok()) return nullptr;
      return new DelayedLink{tcp, absl::ToDoubleSeconds(*rtt)};
    }
    int kad_port = 0;
    if (!absl::SimpleAtoi(tcp.substr(tcp.rfind(':') + 1), &kad_port)) return nullptr;
    auto proxy = DelayProxy::start(kad_port, absl::Microseconds(500));
    auto echo_proxy = DelayProxy::start(*echo, absl::Microseconds(500));
    if (!proxy.ok() || !echo_proxy.ok()) return nullptr;
    auto rtt = tcp_round_trip((*echo_proxy)->port(), 50);
    if (!rtt.ok()) return nullptr;
    return new DelayedLink{absl::StrCat("tcp://127.0.0.1:", (*proxy)->port()),
                           absl::ToDoubleSeconds(*rtt)};
  }();
  return link;
}

// Times each iteration's `op` itself (manual time) and reports it in round
// trips of the link, divided by `per` (operations per iteration).
template <typename Op>
void run_delayed(benchmark::State& state, int per, Op op) {
  const DelayedLink* link = delayed_link();
  if (link == nullptr) return state.SkipWithError("no delayed link: a loopback socket failed");
  double total = 0;
  for (auto _ : state) {
    absl::StatusOr<double> seconds = op(*link);
    if (!seconds.ok()) return state.SkipWithError(seconds.status().ToString().c_str());
    state.SetIterationTime(*seconds);
    total += *seconds;
  }
  const double per_op = total / static_cast<double>(state.iterations()) / per;
  state.counters["link_rtt_us"] = link->rtt_s * 1e6;
  state.counters["round_trips"] = per_op / link->rtt_s;
}

double seconds_of(absl::Time start) { return absl::ToDoubleSeconds(absl::Now() - start); }

// Times `step` (a ping, a run, a burst of launches) on one runner per case,
// set up and warmed once on the delayed link.
template <typename Step>
void run_delayed_step(benchmark::State& state, int per, Step step) {
  std::shared_ptr<ClientRunner> runner;
  run_delayed(state, per, [&](const DelayedLink& link) -> absl::StatusOr<double> {
    if (!runner) {
      runner = std::make_shared<ClientRunner>(link.uri);
      absl::Status s = runner->setup(Work{"scale", "float", {{16}, {16}, false, true, false}});
      for (int i = 0; s.ok() && i < 3; ++i) s = runner->run();
      if (!s.ok()) return s;
    }
    const absl::Time start = absl::Now();
    if (absl::Status s = step(*runner); !s.ok()) return s;
    return seconds_of(start);
  });
}

void register_delayed_link() {
  const std::string prefix = netem_link() ? "grpc-tcp-netem-1ms/" : "grpc-tcp-1ms/";
  benchmark::RegisterBenchmark((prefix + "echo").c_str(), [](benchmark::State& s) {
    run_delayed_step(s, 1, [](ClientRunner& r) { return r.ping(); });
  })->UseManualTime();
  benchmark::RegisterBenchmark((prefix + "launch/run").c_str(), [](benchmark::State& s) {
    run_delayed_step(s, 1, [](ClientRunner& r) { return r.run(); });
  })->UseManualTime();
  constexpr int kLaunches = 2000;
  benchmark::RegisterBenchmark((prefix + "pipelined/static workgroup, dynamic ndrange").c_str(),
                               [](benchmark::State& s) {
                                 run_delayed_step(s, kLaunches, [](ClientRunner& r) {
                                   for (int i = 0; i < kLaunches; ++i)
                                     if (absl::Status st = r.launch(); !st.ok()) return st;
                                   return r.wait();
                                 });
                               })
      ->UseManualTime();
  // A new client's first launch of a kernel kad has cached: connect, open
  // the session, create a queue, load, get the kernel, allocate, run.
  benchmark::RegisterBenchmark(
      (prefix + "time_to_load/first launch of a cached kernel").c_str(),
      [](benchmark::State& s) {
        run_delayed(s, 1, [&](const DelayedLink& link) -> absl::StatusOr<double> {
          static const bool cached = [&] {  // compiled once, before any timing
            ClientRunner warm(link.uri);
            return warm.setup(first_launch_work()).ok() && warm.run().ok();
          }();
          if (!cached) return absl::InternalError("the kernel did not compile");
          ClientRunner r(link.uri);
          const absl::Time start = absl::Now();
          absl::Status st = r.setup(first_launch_work());
          if (st.ok()) st = r.run();
          if (!st.ok()) return st;
          return seconds_of(start);
        });
      })
      ->UseManualTime()
      ->Iterations(10);
}

// transfer/'s daemon: a kad process, as a remote client meets it, so that
// the client and kad each run with their own process's settings (kad's
// allocator policy, server/main.cc, is not the client's).
absl::StatusOr<std::string> transfer_daemon_uri(const std::string& mode) {
  // Destroyed as the bench exits, which stops the kad process (a leaked
  // one outlived the bench, with its workers).
  static const absl::StatusOr<std::unique_ptr<kad::testing::Daemon>> started = [] {
    std::vector<std::string> args;
    if (absl::StartsWith(requested_device_id(), "null")) args.push_back("--null-device");
    return kad::testing::Daemon::start(std::move(args));
  }();
  if (!started.ok()) return started.status();
  return mode == "shm" ? (*started)->unix_uri() + "?transport=shm" : (*started)->tcp_uri();
}

// transfer/: 256 MiB written to and read back from a buffer of a kad process
// (Queue::write, Queue::read: streamed in 1 MiB chunks over gRPC), beside the
// same bytes sent over a plain TCP socket on the same loopback (tcp-plain/).
// bytes/s is the throughput.
void register_transfers() {
  constexpr uint64_t kBytes = uint64_t{256} << 20;
  benchmark::RegisterBenchmark(
      "tcp-plain/transfer/send 256 MiB",
      [](benchmark::State& s) {
        static const absl::StatusOr<int> sink = kad_bench::start_tcp_sink();
        if (!sink.ok()) return s.SkipWithError(sink.status().ToString().c_str());
        const std::string chunk(1 << 20, 'k');
        for (auto _ : s) {
          absl::StatusOr<double> seconds = kad_bench::tcp_send_seconds(*sink, chunk, kBytes);
          if (!seconds.ok()) return s.SkipWithError(seconds.status().ToString().c_str());
          s.SetIterationTime(*seconds);
        }
        s.SetBytesProcessed(static_cast<int64_t>(s.iterations() * kBytes));
      })
      ->UseManualTime()
      ->Iterations(3);
  for (const std::string mode : {"grpc-tcp", "shm"}) {
    for (const bool write : {true, false}) {
      const std::string name =
          absl::StrCat(mode, "/transfer/", write ? "write" : "read", " 256 MiB");
      benchmark::RegisterBenchmark(
          name.c_str(),
          [mode, write](benchmark::State& s) {
            absl::StatusOr<std::string> uri = transfer_daemon_uri(mode);
            if (!uri.ok()) return s.SkipWithError(uri.status().ToString().c_str());
            auto client = kad::Client::connect(*uri, "bench-transfer");
            if (!client.ok()) return s.SkipWithError(client.status().ToString().c_str());
            const std::string device = requested_device_id();
            auto queue = (*client)->create_queue(device);
            auto buffer = (*client)->allocate(kBytes, device);
            if (!queue.ok() || !buffer.ok()) return s.SkipWithError("no queue or buffer");
            std::vector<std::byte> host(kBytes, std::byte{7});
            // Untimed: the buffer's pages are made on its first write, a
            // cost of a new buffer, not of the transfer.
            if (absl::Status st = (*queue)->write(*buffer, 0, host); !st.ok()) {
              return s.SkipWithError(st.ToString().c_str());
            }
            for (auto _ : s) {
              const absl::Status st =
                  write ? (*queue)->write(*buffer, 0, host) : (*queue)->read(*buffer, 0, host);
              if (!st.ok()) return s.SkipWithError(st.ToString().c_str());
            }
            s.SetBytesProcessed(static_cast<int64_t>(s.iterations() * kBytes));
          })
          ->UseRealTime()
          ->Iterations(3);
    }
  }
}

void register_all() {
  // launch/: the cost of a launch on 16 or (4,4,4) items.
  const std::vector<std::pair<std::string, Shape>> launches = {
      {"dynamic workgroup, dynamic ndrange", {{16}, {}, false, false, false}},
      {"dynamic workgroup, dynamic ndrange, workgroupsize given", {{16}, {16}, false, false, true}},
      {"static workgroup, dynamic ndrange", {{16}, {16}, false, true, false}},
      {"static workgroup, static ndrange", {{16}, {16}, true, true, false}},
      {"3D static workgroup, dynamic ndrange", {{4, 4, 4}, {4, 4, 4}, false, true, false}},
      {"3D static workgroup, static ndrange", {{4, 4, 4}, {4, 4, 4}, true, true, false}},
  };
  std::vector<std::string> launch_modes = kModes;
  launch_modes.insert(launch_modes.end(), kWorkerModes.begin(), kWorkerModes.end());
  for (const std::string& mode : launch_modes) {
    for (const auto& [name, shape] : launches) {
      Work w{"scale", "float", shape};
      note_work(mode, w);
      benchmark::RegisterBenchmark((mode + "/launch/" + name).c_str(), [mode,
                                                                        w](benchmark::State& s) {
        run_sync(s, mode, w);
      })->UseRealTime();
    }
  }
  // saxpy/: Z = a X + Y, launch and wait.
  const std::vector<int64_t> sizes =
      g_full ? std::vector<int64_t>{64,    256,   512,   1024,   2048,   4096,
                                    16384, 32768, 65536, 262144, 1048576}
             : std::vector<int64_t>{64, 65536, 1048576};
  const std::vector<std::string> types = g_full
                                             ? std::vector<std::string>{"half", "float", "double"}
                                             : std::vector<std::string>{"half", "float"};
  // Through a worker too, in Float32 only, at sizes that take about 30 µs,
  // 150 µs and 0.5 ms on one core of the 2-core VM: on PoCL's basic driver
  // the larger ones may run on every core (wide_choice.h).
  std::vector<std::string> saxpy_modes = kModes;
  saxpy_modes.push_back("worker-shm");
  const std::vector<int64_t> worker_sizes = {65536, 262144, 1048576};
  for (const std::string& mode : saxpy_modes) {
    for (const std::string& t : types) {
      for (int64_t n : mode == "worker-shm" ? worker_sizes : sizes) {
        if (mode == "worker-shm" && t != "float") continue;
        for (bool static_wg : {false, true}) {
          if (static_wg && n % 1024 != 0) continue;  // a static (1024,) workgroup must divide
          Shape shape{{n},
                      static_wg ? std::vector<int64_t>{1024} : std::vector<int64_t>{},
                      false,
                      static_wg,
                      false};
          Work w{"saxpy", t, shape};
          note_work(mode, w);
          const std::string name = absl::StrFormat(
              "%s/saxpy/%s/%s/%d", mode, static_wg ? "static workgroup=(1024,)" : "default",
              t == "double" ? "Float64"
              : t == "half" ? "Float16"
                            : "Float32",
              n);
          benchmark::RegisterBenchmark(name.c_str(), [mode, w](benchmark::State& s) {
            run_sync(s, mode, w);
          })->UseRealTime();
        }
      }
    }
  }
  // const/: a 16-step relaxation with static workgroup 1024, inputs @Const
  // or not; through a worker, @Const Float32 only.
  for (const std::string& mode : saxpy_modes) {
    for (const std::string t : {"float", "double"}) {
      for (int64_t n : g_full ? std::vector<int64_t>{65536, 262144} : std::vector<int64_t>{65536}) {
        for (bool marked : {true, false}) {
          if (mode == "worker-shm" && (t != "float" || !marked)) continue;
          Work w{"relax", t, {{n}, {1024}, false, true, false}, marked};
          note_work(mode, w);
          const std::string name =
              absl::StrFormat("%s/const/%s/%s/%d", mode, marked ? "@Const" : "unmarked",
                              t == "double" ? "Float64" : "Float32", n);
          benchmark::RegisterBenchmark(name.c_str(), [mode, w](benchmark::State& s) {
            run_sync(s, mode, w);
          })->UseRealTime();
        }
      }
    }
  }
  // pipelined/: launches per second without waiting for each, 200 per
  // wait; pipelined-2000/: 2000 per wait (issue 13's protocol), more than
  // a shared-memory channel's ring holds, so the client waits for room.
  for (const std::string& mode : launch_modes) {
    Work w{"scale", "float", {{16}, {16}, false, true, false}};
    note_work(mode, w);
    benchmark::RegisterBenchmark((mode + "/pipelined/static workgroup, dynamic ndrange").c_str(),
                                 [mode, w](benchmark::State& s) { run_pipelined(s, mode, w, 200); })
        ->UseRealTime();
    benchmark::RegisterBenchmark(
        (mode + "/pipelined-2000/static workgroup, dynamic ndrange").c_str(),
        [mode, w](benchmark::State& s) { run_pipelined(s, mode, w, 2000); })
        ->UseRealTime();
  }
  // raw-basic/: the raw cases the worker modes compare with, on PoCL's
  // basic driver as kad's workers run it, each in a child kad_bench
  // (raw_basic_twin.h). Manual time: the child's time per iteration.
  if (g_device != nullptr && absl::StartsWith(g_device->info().id, "opencl:pocl")) {
    for (const std::string raw_case :
         {"launch/static workgroup, static ndrange", "pipelined/static workgroup, dynamic ndrange",
          "pipelined-2000/static workgroup, dynamic ndrange"}) {
      benchmark::RegisterBenchmark(("raw-basic/" + raw_case).c_str(), run_raw_basic, raw_case)
          ->UseManualTime()
          ->Iterations(1);
    }
  }
  // echo: each transport's bare round trip, with no kad work.
  for (const std::string mode : {"shm", "grpc-unix", "grpc-tcp"}) {
    benchmark::RegisterBenchmark((std::string(mode) + "/echo").c_str(), [mode](
                                                                            benchmark::State& s) {
      run_ping(s, mode);
    })->UseRealTime();
  }
  // grpc-floor-unix/echo, grpc-floor-tcp/echo: a bare gRPC stream's round
  // trip (grpc_floor.h), the floor of grpc-unix/echo and grpc-tcp/echo.
  for (const std::string transport : {"unix", "tcp"}) {
    benchmark::RegisterBenchmark(("grpc-floor-" + transport + "/echo").c_str(),
                                 [transport](benchmark::State& s) {
                                   kad_bench::GrpcFloorClient floor(transport);
                                   for (int i = 0; i < 3; ++i) (void)floor.roundtrip();
                                   kad::testing::AllocCounter counter;
                                   for (auto _ : s) {
                                     if (!floor.roundtrip().ok())
                                       return s.SkipWithError("echo failed");
                                   }
                                   report_allocs(s, counter.counts());
                                 })
        ->UseRealTime();
  }
  register_delayed_link();
  register_transfers();
  // partition/: host only.
  const std::vector<std::pair<std::string, std::pair<bool, bool>>> partitions = {
      {"dynamic workgroup, dynamic ndrange", {false, false}},
      {"static workgroup, dynamic ndrange", {false, true}},
      {"static workgroup, static ndrange", {true, true}},
  };
  for (const auto& [name, statics] : partitions) {
    const auto [static_nd, static_wg] = statics;
    benchmark::RegisterBenchmark(("inproc/partition/" + name).c_str(), [=](benchmark::State& s) {
      kad::KernelSignature sig{"k", std::nullopt, std::nullopt, {}, ""};
      const kad::NdRange range(kad::Dims{1024});
      const kad::Dims wg{16};
      if (static_nd) sig.static_ndrange = range;
      if (static_wg) sig.static_workgroup = wg;
      kad::testing::AllocCounter counter;
      for (auto _ : s) {
        auto p = kad::partition(sig, static_nd ? nullptr : &range, static_wg ? nullptr : &wg);
        benchmark::DoNotOptimize(p);
      }
      report_allocs(s, counter.counts());
    });
  }
}

// ---- processes: time to load, concurrency --------------------------------------------------

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Worker modes, run in a child process (argv: --worker MODE ...). Workers
// inherit the parent's environment (spawn() execs with it), KAD_BENCH_DEVICE
// included, so they launch on the parent's device.
int worker(int argc, char** argv) {
  if (std::string(argv[2]) == "latency" && argc < 6) return 2;
  const std::string mode = argv[2];
  if (mode ==
      "standalone") {  // a fresh process that sets up the device and compiles the kernel itself
    InprocRunner r;
    const Work w = first_launch_work();
    absl::Status s = choose_device();
    if (s.ok()) s = r.setup(w);
    if (s.ok()) s = r.run();
    if (s.ok()) kad_bench::note_first_launch();
    if (!s.ok()) std::fprintf(stderr, "kad_bench standalone worker: %s\n", s.ToString().c_str());
    return s.ok() ? 0 : 1;
  }
  const std::string uri = argv[3];
  ClientRunner r(uri);
  // Bursts of B CPU-heavy launches, a wait after each; with SCALE (argv[7]),
  // launches of SCALE times the items.
  if (mode == "flood" && argc >= 7) {
    const int64_t scale = argc >= 8 ? std::max(1, std::atoi(argv[7])) : 1;
    const Work heavy{"relax", "float", Shape{{scale << 16}, {}}, true};
    if (!r.setup(heavy).ok()) return 1;
    // Launches/s within [0.5 s, S): a burst that straddles an edge counts
    // in proportion. The client goes on for a second more, so that every
    // client contends for the whole window.
    const double seconds = std::atof(argv[4]), from = std::min(0.5, seconds / 2);
    const int burst = std::atoi(argv[6]);
    const auto start = Clock::now();
    double n = 0;
    while (seconds_since(start) < seconds + 1) {
      const double began = seconds_since(start);
      for (int i = 0; i < burst; ++i)
        if (!r.launch().ok()) return 1;
      if (!r.wait().ok()) return 1;
      const double ended = seconds_since(start);
      const double inside = std::min(ended, seconds) - std::max(began, from);
      if (inside > 0) n += burst * inside / std::max(ended - began, 1e-9);
    }
    std::ofstream(argv[5]) << n / (seconds - from) << "\n";
    return 0;
  }
  if (absl::Status s = r.setup(first_launch_work()); !s.ok()) {
    std::fprintf(stderr, "kad_bench %s client: %s\n", mode.c_str(), s.ToString().c_str());
    return 1;
  }
  // N synchronous launches, each timed; written to OUT: the total seconds,
  // the start on the machine's monotonic clock (µs), then each launch's µs.
  // With START_US (argv[6], on the monotonic clock): one launch first, then
  // the timed ones from then on, so that clients whose sessions took longer
  // to set up (a worker each) still launch side by side. With END_US
  // (argv[7]) as well: launches until then (N at most), so that side by side
  // clients all run until the same time, however fast each went.
  if (mode == "latency") {
    const int n = std::atoi(argv[4]);
    const auto to_time = [](const char* us) {
      return Clock::time_point{std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double, std::micro>(std::atof(us)))};
    };
    const std::optional<Clock::time_point> end =
        argc >= 8 ? std::optional(to_time(argv[7])) : std::nullopt;
    std::vector<double> us;
    us.reserve(static_cast<size_t>(std::min(n, 100000)));
    const auto failed = [](const absl::Status& s) {
      std::fprintf(stderr, "kad_bench latency client: %s\n", s.ToString().c_str());
      return 1;
    };
    if (argc >= 7) {
      if (absl::Status s = r.run(); !s.ok()) return failed(s);
      std::this_thread::sleep_until(to_time(argv[6]));
    }
    const auto start = Clock::now();
    for (int i = 0; i < n && (!end || Clock::now() < *end); ++i) {
      const auto t = Clock::now();
      if (absl::Status s = r.run(); !s.ok()) return failed(s);
      us.push_back(seconds_since(t) * 1e6);
    }
    const double total = seconds_since(start);
    std::ofstream out(argv[5]);
    out << total << "\n"
        << std::chrono::duration<double, std::micro>(start.time_since_epoch()).count() << "\n";
    for (double u : us) out << u << "\n";
    return 0;
  }
  return 2;
}

double time_process(const std::vector<std::string>& argv) {
  const auto t = Clock::now();
  const pid_t pid = kad::testing::spawn(argv);
  return kad::testing::wait_exit(pid) == 0 ? seconds_since(t) : -1;
}

// A process that notes its first launch (note_first_launch): seconds from
// its start until it had that launch's result, and until it exited; -1 for
// both when it failed.
struct FirstLaunch {
  double first_launch = -1;
  double process = -1;
};
FirstLaunch time_first_launch(const std::vector<std::string>& argv) {
  const std::string file = absl::StrFormat("/tmp/kad-bench-first-launch-%d", getpid());
  std::filesystem::remove(file);
  setenv(kad_bench::kFirstLaunchFileVariable, file.c_str(),
         1);  // spawn() passes the environment on
  const auto t = Clock::now();
  const pid_t pid = kad::testing::spawn(argv);
  const bool ok = kad::testing::wait_exit(pid) == 0;
  const double process = seconds_since(t);
  unsetenv(kad_bench::kFirstLaunchFileVariable);
  FirstLaunch out;
  Clock::rep noted = 0;
  if (ok && (std::ifstream(file) >> noted)) {
    out.first_launch =
        std::chrono::duration<double>(Clock::duration(noted) - t.time_since_epoch()).count();
    out.process = process;
  }
  std::filesystem::remove(file);
  return out;
}

// shared-grpc-tcp/fair_share: tenants (bearer tokens over TCP) on a device
// that their sessions share in kad (PoCL without workers, as a GPU is
// shared), whose DeviceScheduler decides whose launch goes next.
// worker-grpc-tcp/fair_share: the same on the CPU device whose sessions each
// have a worker (kad's default), scheduled by kad all the same.
struct ShareDaemon {
  std::string dir, uri;
  std::unique_ptr<kad::server::Daemon> daemon;
  // Tenants a, b (one class) and hi (a class above): tokens "bench-share-NAME-token".
  static absl::StatusOr<ShareDaemon> start(uint32_t weight_a, uint32_t weight_b, bool workers) {
    ShareDaemon d;
    d.dir = absl::StrFormat("/tmp/kad-bench-shared-%d", getpid());
    std::filesystem::create_directories(d.dir);
    std::ofstream tokens(d.dir + "/tokens");
    kad::server::DaemonOptions options;
    options.listen = {"tcp://127.0.0.1:0"};
    options.tokens_file = d.dir + "/tokens";
    if (workers) {
      options.workers.command = {.executable = bench_worker_executable(),
                                 .args = {},
                                 .uids = kad::testing::worker_uids_as_root()};
    }
    for (const char* name : {"a", "b", "hi"}) {
      tokens << "bench-share-" << name << "-token " << name << "\n";
      kad::server::TenantSpec t;
      t.name = name;
      t.weight = name[0] == 'a' ? weight_a : name[0] == 'b' ? weight_b : 1;
      t.priority = name[0] == 'h' ? 1 : 0;
      options.limits.tenants.push_back(t);
    }
    tokens.close();
    auto started = kad::server::Daemon::start(kad::discover_devices(), std::move(options));
    if (!started.ok()) return started.status();
    d.daemon = *std::move(started);
    d.uri = d.daemon->uris()[0];
    // The kernels are built before any clock starts.
    d.client("a", {"flood", "0.1", "warm", "1"});
    d.client("a", {"flood", "0.1", "warm", "1", "8"});
    d.client("a", {"latency", "3", "warm"});
    return d;
  }
  ~ShareDaemon() {
    daemon.reset();
    if (!dir.empty()) std::filesystem::remove_all(dir);
  }
  ShareDaemon() = default;
  ShareDaemon(ShareDaemon&&) = default;
  // A client process of `tenant`: kad_bench --worker MODE URI ARGS..., its
  // output file named by args[1] under dir.
  pid_t spawn(const std::string& tenant, std::vector<std::string> args) const {
    setenv("KAD_TOKEN", absl::StrCat("bench-share-", tenant, "-token").c_str(), 1);
    args[2] = dir + "/" + args[2];
    std::vector<std::string> argv = {g_self, "--worker", args[0], uri, args[1], args[2]};
    argv.insert(argv.end(), args.begin() + 3, args.end());
    const pid_t pid = kad::testing::spawn(argv);
    unsetenv("KAD_TOKEN");
    return pid;
  }
  int client(const std::string& tenant, std::vector<std::string> args) const {
    return kad::testing::wait_exit(spawn(tenant, std::move(args)));
  }
  double rate(const std::string& file) const {
    double r = 0;
    std::ifstream(dir + "/" + file) >> r;
    return r;
  }
  // The p99 of a latency client's launches, in microseconds.
  double p99_us(const std::string& file) const {
    std::ifstream in(dir + "/" + file);
    double total = 0, start = 0, us = 0;
    in >> total >> start;
    std::vector<double> v;
    while (in >> us) v.push_back(us);
    if (v.empty()) return -1;
    std::sort(v.begin(), v.end());
    return v[v.size() * 99 / 100];
  }
};

void register_fair_share(bool workers) {
  const std::string mode = workers ? "worker-grpc-tcp" : "shared-grpc-tcp";
  // Two tenants of one class, three client processes each, all with more
  // work than the device takes (each client submits bursts and waits for
  // each; three keep the tenant's backlog while one waits), for 3 s:
  // launches/s of each tenant and a's share of the device's time (0.5 for
  // equal weights whatever each submits; 2/3 for weights 2:1). Where a's
  // launches are `scale_a` times b's work, a's share counts them so.
  struct Case {
    const char* name;
    uint32_t weight_a, weight_b;
    int burst_a, burst_b;
    int scale_a = 1;
  };
  for (const Case c : {Case{"equal weights, tenant a submits 10x more", 1, 1, 160, 16},
                       Case{"weights 2 and 1, equal submissions", 2, 1, 64, 64},
                       Case{"weights 4 and 1, equal submissions", 4, 1, 64, 64},
                       Case{"equal weights, tenant a's launches 8x longer", 1, 1, 16, 16, 8}}) {
    benchmark::RegisterBenchmark(
        absl::StrCat(mode, "/fair_share/", c.name).c_str(),
        [c, workers](benchmark::State& s) {
          auto d = ShareDaemon::start(c.weight_a, c.weight_b, workers);
          if (!d.ok()) return s.SkipWithError(d.status().ToString().c_str());
          for (auto _ : s) {
            const auto t = Clock::now();
            std::vector<pid_t> pids;
            for (int i = 0; i < 3; ++i) {
              pids.push_back(d->spawn("a", {"flood", "3", absl::StrCat("rate-a", i),
                                            std::to_string(c.burst_a), std::to_string(c.scale_a)}));
              pids.push_back(d->spawn(
                  "b", {"flood", "3", absl::StrCat("rate-b", i), std::to_string(c.burst_b)}));
            }
            bool ok = true;
            for (pid_t p : pids) ok &= kad::testing::wait_exit(p) == 0;
            if (!ok) return s.SkipWithError("a client failed");
            s.SetIterationTime(seconds_since(t));
            double ra = 0, rb = 0;
            for (int i = 0; i < 3; ++i) {
              ra += d->rate(absl::StrCat("rate-a", i));
              rb += d->rate(absl::StrCat("rate-b", i));
            }
            s.counters["a_per_s"] = ra;
            s.counters["b_per_s"] = rb;
            const double ta = ra * c.scale_a;
            s.counters["a_share"] = ta + rb > 0 ? ta / (ta + rb) : 0;
          }
        })
        ->UseManualTime()
        ->Iterations(1)
        ->Unit(benchmark::kMillisecond);
  }
  // A light tenant's synchronous launches (small saxpy, 300 of them): p99
  // alone, then while tenant a floods the device (bursts of 160 heavy
  // launches), first from the class above a's, then from a's own class.
  benchmark::RegisterBenchmark(
      absl::StrCat(mode, "/fair_share/light tenant's p99 launch latency beside a heavy one")
          .c_str(),
      [workers](benchmark::State& s) {
        auto d = ShareDaemon::start(1, 1, workers);
        if (!d.ok()) return s.SkipWithError(d.status().ToString().c_str());
        for (auto _ : s) {
          const auto t = Clock::now();
          if (d->client("hi", {"latency", "300", "alone"}) != 0)
            return s.SkipWithError("a client failed");
          for (const char* light : {"hi", "b"}) {
            const pid_t heavy = d->spawn("a", {"flood", "4", "heavy", "160"});
            std::this_thread::sleep_for(std::chrono::milliseconds(500));  // a fills the device
            if (d->client(light, {"latency", "300", absl::StrCat("beside-", light)}) != 0 ||
                kad::testing::wait_exit(heavy) != 0)
              return s.SkipWithError("a client failed");
          }
          s.SetIterationTime(seconds_since(t));
          s.counters["p99_alone_us"] = d->p99_us("alone");
          s.counters["p99_higher_class_us"] = d->p99_us("beside-hi");
          s.counters["p99_same_class_us"] = d->p99_us("beside-b");
        }
      })
      ->UseManualTime()
      ->Iterations(1)
      ->Unit(benchmark::kMillisecond);
}

// time_to_load of a new client process (CLIENT, linking libkad_client
// alone, as a user's program does) through MODE.
void register_first_launch(const std::string& name, const std::string& mode,
                           const std::string& client) {
  benchmark::RegisterBenchmark(name.c_str(),
                               [mode, client](benchmark::State& s) {
                                 const std::string uri = uri_for(mode);
                                 time_process({client, uri});  // compiles once, in kad
                                 double process = 0;
                                 for (auto _ : s) {
                                   // A client that comes to a quiet daemon: the one before it
                                   // has gone, and kad has had a moment to start a spare worker.
                                   std::this_thread::sleep_for(std::chrono::milliseconds(500));
                                   const FirstLaunch t = time_first_launch({client, uri});
                                   if (t.first_launch < 0) return s.SkipWithError("client failed");
                                   s.SetIterationTime(t.first_launch);
                                   process += t.process;
                                 }
                                 s.counters["whole_process_ms"] =
                                     1e3 * process / static_cast<double>(s.iterations());
                               })
      ->UseManualTime()
      ->Iterations(5)
      ->Unit(benchmark::kMillisecond);
}

void register_processes() {
  benchmark::RegisterBenchmark("time_to_load/daemon start until it serves",
                               [](benchmark::State& s) {
                                 for (auto _ : s) {
                                   const auto t = Clock::now();
                                   auto d = kad::testing::Daemon::start();
                                   if (!d.ok())
                                     return s.SkipWithError(d.status().ToString().c_str());
                                   s.SetIterationTime(seconds_since(t));
                                 }
                               })
      ->UseManualTime()
      ->Iterations(3)
      ->Unit(benchmark::kMillisecond);
  for (const std::string mode : {"shm", "grpc-unix", "worker-shm", "worker-grpc-unix"})
    register_first_launch(
        mode + "/time_to_load/new client's connect and first launch of a cached kernel", mode,
        KAD_BENCH_CLIENT_PATH);
  // The same client on Debian's shared gRPC, protobuf and abseil: what a
  // program pays that does not ask for the static runtime
  // (cmake/client_runtime.cmake).
  register_first_launch(
      "worker-shm/time_to_load/new client's connect and first launch of a cached kernel, client "
      "on shared gRPC",
      "worker-shm", KAD_BENCH_SHARED_CLIENT_PATH);
  // Named after PoCL, as always, on PoCL; on a GPU without kad's toolchain the
  // "compile" is a lookup in the on-disk cache and the driver's JIT.
  const bool pocl = g_device != nullptr && absl::StartsWith(g_device->info().id, "opencl:pocl");
  benchmark::RegisterBenchmark(
      absl::StrFormat(
          "raw/time_to_load/fresh process that sets up %s and compiles the kernel itself",
          pocl ? "PoCL" : "the device")
          .c_str(),
      [](benchmark::State& s) {
        setenv("POCL_KERNEL_CACHE", "0", 1);  // no help from PoCL's disk cache
        double process = 0;
        for (auto _ : s) {
          const FirstLaunch t = time_first_launch({g_self, "--worker", "standalone"});
          if (t.first_launch < 0) return s.SkipWithError("worker failed");
          s.SetIterationTime(t.first_launch);
          process += t.process;
        }
        s.counters["whole_process_ms"] = 1e3 * process / static_cast<double>(s.iterations());
        unsetenv("POCL_KERNEL_CACHE");
      })
      ->UseManualTime()
      ->Iterations(3)
      ->Unit(benchmark::kMillisecond);

  if (pocl) {
    register_fair_share(/*workers=*/false);
    register_fair_share(/*workers=*/true);
  }

  // concurrency: client processes launching on one device at once.
  const std::vector<int> counts =
      g_full ? std::vector<int>{1, 2, 4, 8, 16, 32} : std::vector<int>{1, 4, 16, 32};
  for (const std::string mode : {"shm", "worker-shm"})
    for (int clients : counts) {
      benchmark::RegisterBenchmark(
          absl::StrFormat("%s/concurrency/clients:%d", mode, clients).c_str(),
          [clients, mode](benchmark::State& s) {
            // Every client launches for the same time (a cap of launches
            // aside), so the rates compare over one common window.
            const auto run_for = std::chrono::milliseconds(g_full ? 2000 : 1000);
            const int cap = 200000;
            for (auto _ : s) {
              std::vector<pid_t> pids;
              std::vector<std::string> files;
              const auto t = Clock::now();
              // All start launching at once, after time enough for every
              // client to connect and set up (a worker each, in worker modes).
              const auto start = t + std::chrono::milliseconds(300 + 100 * clients);
              const auto us_of = [](Clock::time_point at) {
                return absl::StrFormat(
                    "%.0f",
                    std::chrono::duration<double, std::micro>(at.time_since_epoch()).count());
              };
              for (int c = 0; c < clients; ++c) {
                files.push_back(absl::StrFormat("/tmp/kad-bench-lat-%d-%d", getpid(), c));
                pids.push_back(kad::testing::spawn({g_self, "--worker", "latency", uri_for(mode),
                                                    std::to_string(cap), files.back(), us_of(start),
                                                    us_of(start + run_for)}));
              }
              bool ok = true;
              for (pid_t p : pids) ok &= kad::testing::wait_exit(p) == 0;
              const double wall = seconds_since(t);
              if (!ok) return s.SkipWithError("a client failed");
              // Each client's rate within the window all of them ran in
              // (their starts are a process spawn apart), from when each
              // of its launches ended on the machine's monotonic clock.
              std::vector<double> latencies, rates, starts, ends;
              std::vector<std::vector<double>> done(files.size());
              for (size_t i = 0; i < files.size(); ++i) {
                std::ifstream in(files[i]);
                double total = 0, start = 0, us = 0, at = 0;
                in >> total >> start;
                at = start;
                while (in >> us) {
                  latencies.push_back(us);
                  at += us;
                  done[i].push_back(at);
                }
                starts.push_back(start);
                ends.push_back(start + total * 1e6);
                std::filesystem::remove(files[i]);
              }
              const double from = *std::max_element(starts.begin(), starts.end());
              const double to = *std::min_element(ends.begin(), ends.end());
              for (size_t i = 0; i < files.size(); ++i) {
                if (to <= from) {  // no common window: whole runs
                  rates.push_back(static_cast<double>(done[i].size()) /
                                  ((ends[i] - starts[i]) / 1e6));
                  continue;
                }
                const auto in_window = std::count_if(done[i].begin(), done[i].end(),
                                                     [&](double t) { return t > from && t <= to; });
                rates.push_back(static_cast<double>(in_window) / ((to - from) / 1e6));
              }
              std::sort(latencies.begin(), latencies.end());
              const double sum = std::accumulate(rates.begin(), rates.end(), 0.0);
              double squares = 0;
              for (double r : rates) squares += r * r;
              s.SetIterationTime(wall);
              // All clients together, side by side (the set-up before excluded).
              s.counters["launches_per_s"] = sum;
              s.counters["p50_us"] = latencies[latencies.size() / 2];
              s.counters["p99_us"] = latencies[latencies.size() * 99 / 100];
              s.counters["jain"] = sum * sum / (clients * squares);
              s.counters["jain_window_ms"] = std::max(0.0, (to - from) / 1e3);
            }
          })
          ->UseManualTime()
          ->Iterations(1)
          ->Unit(benchmark::kMillisecond);
    }
}

// --prepare_gpu_cache: lowers every raw kernel of the profile to PTX into the
// on-disk cache (KernelLowering::shared(): KAD_CACHE_DIR), for a GPU machine
// that has no toolchain of kad's. Needs the toolchain, no GPU.
int prepare_gpu_cache() {
  kad::KernelLowering& lowering = kad::KernelLowering::shared();
  if (!lowering.cache().enabled()) {
    std::fprintf(stderr,
                 "kad_bench --prepare_gpu_cache: the on-disk cache is off (KAD_CACHE_DIR)\n");
    return 1;
  }
  if (absl::Status s = lowering.toolchain_status(); !s.ok()) {
    std::fprintf(stderr,
                 "kad_bench --prepare_gpu_cache: no toolchain (%s); only cached kernels "
                 "can be served\n",
                 s.ToString().c_str());
  }
  std::set<std::string> seen;  // raw sources; the entry is part of each
  int done = 0, failed = 0;
  for (const Work& w : g_raw_works) {
    if (!seen.insert(w.source(true)).second) continue;
    absl::StatusOr<std::string> ptx = raw_ptx(w);
    if (ptx.ok()) {
      ++done;
    } else {
      ++failed;
      std::fprintf(stderr, "kad_bench --prepare_gpu_cache: raw `%s` (%s): %s\n", w.kernel.c_str(),
                   w.type.c_str(), ptx.status().ToString().c_str());
    }
  }
  const kad::CodeCache::Stats stats = lowering.cache().stats();
  std::printf(
      "prepared %d raw kernels of the %s profile as PTX (%s) in %s: %llu lowered now, "
      "%llu already cached%s\n",
      done, g_full ? "full" : "quick", kRawPtxTarget, lowering.cache().folder().c_str(),
      static_cast<unsigned long long>(stats.stores), static_cast<unsigned long long>(stats.hits),
      failed > 0 ? absl::StrFormat("; %d failed", failed).c_str() : "");
  return failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  // As kad's main: no lock-order checks on every Mutex (the suites keep them).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  if (argc > 2 && std::strcmp(argv[1], "--worker") == 0) return worker(argc, argv);
  g_self = std::filesystem::canonical("/proc/self/exe").string();
  std::vector<char*> args;
  bool prepare = false;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--profile=full") == 0)
      g_full = true;
    else if (std::strcmp(argv[i], "--prepare_gpu_cache") == 0)
      prepare = true;
    else if (std::strcmp(argv[i], "--profile=quick") != 0)
      args.push_back(argv[i]);
    if (absl::StartsWith(argv[i], "--benchmark_min_time=")) g_min_time_flag = argv[i];
  }
  if (prepare) {
    register_all();  // collects the raw kernels; nothing runs
    return prepare_gpu_cache();
  }
  if (absl::Status s = choose_device(); !s.ok()) {
    std::fprintf(stderr, "kad_bench: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  int n = static_cast<int>(args.size());
  register_all();
  register_processes();
  benchmark::Initialize(&n, args.data());
  // The device, in results.json's context (report.py prints it).
  const kad::DeviceInfo& device = g_device->info();
  benchmark::AddCustomContext("kad_device", device.id);
  benchmark::AddCustomContext("kad_device_name", device.name);
  benchmark::AddCustomContext("kad_device_backend", device.backend);
  benchmark::AddCustomContext("kad_device_chosen_by",
                              requested_device_id().empty() ? "default" : "KAD_BENCH_DEVICE");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  stop_daemons();
  return 0;
}
