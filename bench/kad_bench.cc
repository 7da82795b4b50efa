// kad's benchmark suite (issue "Benchmark suite"): KernelAbstractions' names,
// each in every mode, side by side in one run:
//   raw/        the OpenCL API called directly — no kad code, the floor
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
#include <benchmark/benchmark.h>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <CL/cl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <thread>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backends/registry.h"
#include "core/kernel.h"
#include "core/launch.h"
#include "core/driver_scope.h"
#include "core/partition.h"
#include "kad/client.h"
#include "server/engine.h"
#include "server/kad_service.h"
#include "server/shm_listener.h"
#include "tests/support/alloc_counter.h"
#include "tests/support/daemon.h"
#include "tests/support/in_process_daemon.h"

namespace {

bool g_full = false;

// ---- kernels ------------------------------------------------------------------------

// The kad kernels and their raw OpenCL twins (no prelude, get_global_id).
// Float16 is storage-only `half` (vload_half / vstore_half), computed in float,
// so that it runs on devices without cl_khr_fp16.
std::string saxpy_source(const std::string& t, bool raw) {
  const bool half = t == "half";
  const std::string st = half ? "float" : t;  // the scalar's type
  const std::string body = absl::StrFormat(
      "(%s global %s* z, %s a, const global %s* restrict x, const global %s* restrict y) {\n",
      raw ? "" : "KAD_CONTEXT,", t, st, t, t);
  const std::string index = raw ? "  size_t i = get_global_id(0);\n"
                                : "  if (!kad_active()) return;\n  long i = kad_global_linear();\n";
  const std::string op = half ? "  vstore_half(a * vload_half(i, x) + vload_half(i, y), i, z);\n"
                              : "  z[i] = a * x[i] + y[i];\n";
  return absl::StrCat(t == "double" ? "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" : "",
                      "kernel void saxpy", body, index, op, "}\n");
}

// const/: a 16-step relaxation, its inputs `const restrict` (@Const) or not.
std::string relax_source(const std::string& t, bool marked, bool raw) {
  const std::string in = marked ? absl::StrCat("const global ", t, "* restrict")
                                : absl::StrCat("global ", t, "*");
  return absl::StrCat(
      t == "double" ? "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" : "",
      "kernel void relax(", raw ? "" : "KAD_CONTEXT, ", "global ", t, "* out, ", in, " x, ", in,
      " y) {\n",
      raw ? "  long i = get_global_id(0), n = get_global_size(0);\n"
          : "  if (!kad_active()) return;\n  long i = kad_global_linear(), n = kad_ndrange(0);\n",
      "  ", t, " acc = 0;\n",
      "  for (int s = 0; s < 16; ++s) acc += x[(i + s) % n] * y[(i + 16 - s) % n];\n",
      "  out[i] = acc;\n}\n");
}

constexpr char kScale[] = R"(
kernel void scale(KAD_CONTEXT, global float* x, float a) {
  if (kad_active()) x[kad_global_linear()] *= a;
}
)";
constexpr char kRawScale[] = R"(
kernel void scale(global float* x, float a) {
  x[get_global_id(0) + get_global_size(0) * (get_global_id(1) + get_global_size(1) * get_global_id(2))] *= a;
}
)";

// What one benchmark launches.
struct Shape {
  std::vector<int64_t> ndrange;    // extents
  std::vector<int64_t> workgroup;  // empty: tuned
  bool static_ndrange = false;
  bool static_workgroup = false;
  bool give_workgroup = false;     // a dynamic workgroup size given at launch
};

struct Work {
  std::string kernel;  // "saxpy", "scale" or "relax"
  std::string type;    // element type: "float", "double" or "half"
  Shape shape;
  bool marked = true;  // relax: inputs const restrict
  size_t element_bytes() const { return type == "double" ? 8 : type == "half" ? 2 : 4; }
  // Arguments in order: B a buffer, C a const buffer, S the scalar `a`.
  std::string layout() const {
    if (kernel == "saxpy") return "BSCC";
    if (kernel == "relax") return marked ? "BCC" : "BBB";
    return "BS";
  }
  std::string source(bool raw) const {
    if (kernel == "saxpy") return saxpy_source(type, raw);
    if (kernel == "relax") return relax_source(type, marked, raw);
    return raw ? kRawScale : kScale;
  }
  bool double_scalar() const { return type == "double"; }
  int64_t items() const {
    int64_t n = 1;
    for (int64_t e : shape.ndrange) n *= e;
    return n;
  }
};

// ---- one runner per mode -------------------------------------------------------------

class Runner {
 public:
  virtual ~Runner() = default;
  virtual absl::Status setup(const Work& w) = 0;
  virtual absl::Status launch() = 0;  // enqueue one launch
  virtual absl::Status wait() = 0;    // until everything is done
  virtual absl::Status ping() { return absl::UnimplementedError("no transport"); }
};

class RawRunner final : public Runner {
 public:
  ~RawRunner() override {
    for (cl_mem m : mems_) clReleaseMemObject(m);
    if (kernel_) clReleaseKernel(kernel_);
    if (program_) clReleaseProgram(program_);
    if (queue_) clReleaseCommandQueue(queue_);
    if (context_) clReleaseContext(context_);
  }
  absl::Status setup(const Work& w) override {
    cl_platform_id platform;
    cl_int err = clGetPlatformIDs(1, &platform, nullptr);
    err |= clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device_, nullptr);
    if (err != CL_SUCCESS) return absl::UnavailableError("no OpenCL device");
    context_ = clCreateContext(nullptr, 1, &device_, nullptr, nullptr, &err);
    queue_ = clCreateCommandQueue(context_, device_, 0, &err);
    const std::string src = w.source(true);
    const char* text = src.c_str();
    program_ = clCreateProgramWithSource(context_, 1, &text, nullptr, &err);
    if (clBuildProgram(program_, 1, &device_, "", nullptr, nullptr) != CL_SUCCESS)
      return absl::InternalError("raw kernel did not build");
    kernel_ = clCreateKernel(program_, w.kernel.c_str(), &err);
    const size_t bytes = static_cast<size_t>(w.items()) * w.element_bytes();
    layout_ = w.layout();
    for (char c : layout_)
      if (c != 'S') mems_.push_back(clCreateBuffer(context_, CL_MEM_READ_WRITE, bytes, nullptr, &err));
    dims_ = static_cast<cl_uint>(w.shape.ndrange.size());
    for (cl_uint d = 0; d < dims_; ++d) global_[d] = static_cast<size_t>(w.shape.ndrange[d]);
    have_local_ = !w.shape.workgroup.empty();
    for (cl_uint d = 0; d < dims_; ++d)
      local_[d] = have_local_ && d < w.shape.workgroup.size() ? w.shape.workgroup[d] : 1;
    double_ = w.double_scalar();
    return absl::OkStatus();
  }
  // Everything here is the driver's: DriverScope keeps it out of kad_allocs.
  absl::Status launch() override {
    kad::DriverScope driver;
    const float af = 2.0f;
    const double ad = 2.0;
    size_t m = 0;
    for (cl_uint i = 0; i < layout_.size(); ++i) {
      if (layout_[i] != 'S') clSetKernelArg(kernel_, i, sizeof(cl_mem), &mems_[m++]);
      else if (double_) clSetKernelArg(kernel_, i, sizeof(double), &ad);
      else clSetKernelArg(kernel_, i, sizeof(float), &af);
    }
    cl_event e;
    if (clEnqueueNDRangeKernel(queue_, kernel_, dims_, nullptr, global_,
                               have_local_ ? local_ : nullptr, 0, nullptr, &e) != CL_SUCCESS)
      return absl::InternalError("clEnqueueNDRangeKernel failed");
    if (last_) clReleaseEvent(last_);
    last_ = e;
    return absl::OkStatus();
  }
  absl::Status wait() override {
    kad::DriverScope driver;
    if (last_) clWaitForEvents(1, &last_);
    return absl::OkStatus();
  }

 private:
  cl_device_id device_ = nullptr;
  cl_context context_ = nullptr;
  cl_command_queue queue_ = nullptr;
  cl_program program_ = nullptr;
  cl_kernel kernel_ = nullptr;
  cl_event last_ = nullptr;
  std::vector<cl_mem> mems_;
  cl_uint dims_ = 1;
  size_t global_[3] = {1, 1, 1}, local_[3] = {1, 1, 1};
  bool have_local_ = false, double_ = false;
  std::string layout_;
};

kad::DeviceRegistry& registry() {
  static auto* r = new kad::DeviceRegistry(kad::discover_devices());
  return *r;
}

class InprocRunner final : public Runner {
 public:
  absl::Status setup(const Work& w) override {
    kad::Device& device = *registry().default_device();
    auto q = device.create_queue();
    if (!q.ok()) return q.status();
    queue_ = *std::move(q);
    auto m = kad::Module::create(kad::ModuleFormat::kOpenClC, w.source(false));
    if (!m.ok()) return m.status();
    const kad::ScalarType t = w.double_scalar() ? kad::ScalarType::kF64 : kad::ScalarType::kF32;
    kad::KernelSignature sig{w.kernel, std::nullopt, std::nullopt, {}, ""};
    for (char c : w.layout()) {
      sig.args.push_back(c == 'B' ? kad::ArgSpec::buffer()
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

// The daemon of the client modes, in this process.
kad::testing::InProcessDaemon& daemon() {
  static auto* d = new kad::testing::InProcessDaemon("bench");
  return *d;
}

class ClientRunner final : public Runner {
 public:
  explicit ClientRunner(std::string mode) : mode_(std::move(mode)) {}
  absl::Status setup(const Work& w) override { return setup_uri(daemon().uri(mode_), w); }
  absl::Status setup_uri(const std::string& uri, const Work& w) {
    auto c = kad::Client::connect(uri, "bench");
    if (!c.ok()) return c.status();
    client_ = *std::move(c);
    auto q = client_->create_queue();
    if (!q.ok()) return q.status();
    queue_ = *std::move(q);
    auto m = client_->load_module(w.source(false));
    if (!m.ok()) return m.status();
    const auto t = w.double_scalar() ? kad::client::ScalarType::kF64 : kad::client::ScalarType::kF32;
    kad::client::KernelSpec spec{.entry = w.kernel};
    for (char c : w.layout()) {
      spec.args.push_back(c == 'B' ? kad::client::ArgSpec::buffer()
                          : c == 'C' ? kad::client::ArgSpec::const_buffer()
                                     : kad::client::ArgSpec::scalar_of(t));
    }
    for (int64_t e : w.shape.ndrange) range_.v[range_.rank++] = e;
    for (int64_t e : w.shape.workgroup) workgroup_.v[workgroup_.rank++] = e;
    if (w.shape.static_ndrange) spec.static_ndrange = range_;
    if (w.shape.static_workgroup) spec.static_workgroup = workgroup_;
    auto k = client_->get_kernel(*m, spec);
    if (!k.ok()) return k.status();
    kernel_ = *k;
    for (char c : w.layout()) {
      if (c == 'S') {
        args_.push_back(t == kad::client::ScalarType::kF64 ? kad::client::Arg::scalar(2.0)
                                                           : kad::client::Arg::scalar(2.0f));
        continue;
      }
      auto b = client_->allocate(static_cast<uint64_t>(w.items()) * w.element_bytes());
      if (!b.ok()) return b.status();
      args_.push_back(kad::client::Arg::buffer(*b));
    }
    static_ndrange_ = w.shape.static_ndrange;
    give_workgroup_ = w.shape.give_workgroup;
    return absl::OkStatus();
  }
  absl::Status launch() override {
    return queue_->submit(kernel_, static_ndrange_ ? nullptr : &range_,
                          give_workgroup_ ? &workgroup_ : nullptr, args_);
  }
  absl::Status wait() override { return queue_->wait(); }
  absl::Status ping() override { return queue_->ping(); }

 private:
  std::string mode_;
  std::unique_ptr<kad::Client> client_;
  std::unique_ptr<kad::client::Queue> queue_;
  kad::client::Kernel kernel_;
  std::vector<kad::client::Arg> args_;
  kad::client::Dims range_, workgroup_;
  bool static_ndrange_ = false, give_workgroup_ = false;
};

std::unique_ptr<Runner> runner_for(const std::string& mode) {
  if (mode == "raw") return std::make_unique<RawRunner>();
  if (mode == "inproc") return std::make_unique<InprocRunner>();
  return std::make_unique<ClientRunner>(mode);
}

const std::vector<std::string> kModes = {"raw", "inproc", "shm", "grpc-unix", "grpc-tcp"};

// ---- measuring -------------------------------------------------------------------------

void report_allocs(benchmark::State& state, const kad::testing::AllocCounts& c) {
  const double n = static_cast<double>(state.iterations());
  state.counters["kad_allocs"] = static_cast<double>(c.kad_allocs + c.service_allocs) / n;
  state.counters["kad_bytes"] = static_cast<double>(c.kad_bytes) / n;
  state.counters["total_allocs"] = static_cast<double>(c.total_allocs) / n;
  state.counters["total_bytes"] = static_cast<double>(c.total_bytes) / n;
}

// Synchronous: launch and wait, each iteration.
void run_sync(benchmark::State& state, const std::string& mode, const Work& w) {
  auto runner = runner_for(mode);
  if (absl::Status s = runner->setup(w); !s.ok()) return state.SkipWithError(s.ToString().c_str());
  for (int i = 0; i < 3; ++i) {
    if (!runner->launch().ok() || !runner->wait().ok()) return state.SkipWithError("warm-up failed");
  }
  kad::testing::AllocCounter counter;
  for (auto _ : state) {
    if (!runner->launch().ok() || !runner->wait().ok()) return state.SkipWithError("launch failed");
  }
  report_allocs(state, counter.counts());
}

// Pipelined: launches submitted without waiting; items/s is launches per second.
void run_pipelined(benchmark::State& state, const std::string& mode, const Work& w) {
  auto runner = runner_for(mode);
  if (absl::Status s = runner->setup(w); !s.ok()) return state.SkipWithError(s.ToString().c_str());
  constexpr int kBatch = 200;
  kad::testing::AllocCounter counter;
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i) {
      if (!runner->launch().ok()) return state.SkipWithError("launch failed");
    }
    if (!runner->wait().ok()) return state.SkipWithError("wait failed");
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
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
  for (const std::string& mode : kModes) {
    for (const auto& [name, shape] : launches) {
      Work w{"scale", "float", shape};
      benchmark::RegisterBenchmark((mode + "/launch/" + name).c_str(),
                                   [mode, w](benchmark::State& s) { run_sync(s, mode, w); })
          ->UseRealTime();
    }
  }
  // saxpy/: Z = a X + Y, launch and wait.
  const std::vector<int64_t> sizes =
      g_full ? std::vector<int64_t>{64, 256, 512, 1024, 2048, 4096, 16384, 32768, 65536, 262144, 1048576}
             : std::vector<int64_t>{64, 65536, 1048576};
  const std::vector<std::string> types = g_full
                                              ? std::vector<std::string>{"half", "float", "double"}
                                              : std::vector<std::string>{"half", "float"};
  for (const std::string& mode : kModes) {
    for (const std::string& t : types) {
      for (int64_t n : sizes) {
        for (bool static_wg : {false, true}) {
          if (static_wg && n % 1024 != 0) continue;  // a static (1024,) workgroup must divide
          Shape shape{{n}, static_wg ? std::vector<int64_t>{1024} : std::vector<int64_t>{},
                      false, static_wg, false};
          Work w{"saxpy", t, shape};
          const std::string name = absl::StrFormat(
              "%s/saxpy/%s/%s/%d", mode, static_wg ? "static workgroup=(1024,)" : "default",
              t == "double" ? "Float64" : t == "half" ? "Float16" : "Float32", n);
          benchmark::RegisterBenchmark(name.c_str(),
                                       [mode, w](benchmark::State& s) { run_sync(s, mode, w); })
              ->UseRealTime();
        }
      }
    }
  }
  // const/: a 16-step relaxation with static workgroup 1024, inputs @Const or not.
  for (const std::string& mode : kModes) {
    for (const std::string t : {"float", "double"}) {
      for (int64_t n : g_full ? std::vector<int64_t>{65536, 262144} : std::vector<int64_t>{65536}) {
        for (bool marked : {true, false}) {
          Work w{"relax", t, {{n}, {1024}, false, true, false}, marked};
          const std::string name = absl::StrFormat("%s/const/%s/%s/%d", mode,
                                                   marked ? "@Const" : "unmarked",
                                                   t == "double" ? "Float64" : "Float32", n);
          benchmark::RegisterBenchmark(name.c_str(),
                                       [mode, w](benchmark::State& s) { run_sync(s, mode, w); })
              ->UseRealTime();
        }
      }
    }
  }
  // pipelined/: launches per second without waiting for each.
  for (const std::string& mode : kModes) {
    Work w{"scale", "float", {{16}, {16}, false, true, false}};
    benchmark::RegisterBenchmark((mode + "/pipelined/static workgroup, dynamic ndrange").c_str(),
                                 [mode, w](benchmark::State& s) { run_pipelined(s, mode, w); })
        ->UseRealTime();
  }
  // echo: each transport's bare round trip, with no kad work.
  for (const std::string mode : {"shm", "grpc-unix", "grpc-tcp"}) {
    benchmark::RegisterBenchmark((std::string(mode) + "/echo").c_str(),
                                 [mode](benchmark::State& s) { run_ping(s, mode); })
        ->UseRealTime();
  }
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

std::string g_self;  // this binary, re-executed as a worker

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Worker modes, run in a child process (argv: --worker MODE ...).
int worker(int argc, char** argv) {
  if ((std::string(argv[2]) == "latency" && argc < 6) || (std::string(argv[2]) == "first-launch" && argc < 4)) return 2;
  const std::string mode = argv[2];
  if (mode == "standalone") {  // a fresh process that sets up PoCL and compiles the kernel itself
    InprocRunner r;
    Work w{"scale", "float", {{64}, {}, false, false, false}};
    return r.setup(w).ok() && r.launch().ok() && r.wait().ok() ? 0 : 1;
  }
  const std::string uri = argv[3];
  ClientRunner r(uri.find("?transport=grpc") != std::string::npos ? "grpc-unix" : "shm");
  Work w{"scale", "float", {{64}, {}, false, false, false}};
  // The worker's uri comes from the parent's in-process daemon; reuse its naming.
  if (!r.setup_uri(uri, w).ok()) return 1;
  if (mode == "first-launch") return r.launch().ok() && r.wait().ok() ? 0 : 1;
  if (mode == "latency") {  // N synchronous launches, each timed; written to OUT
    const int n = std::atoi(argv[4]);
    std::vector<double> us;
    us.reserve(static_cast<size_t>(n));
    const auto start = Clock::now();
    for (int i = 0; i < n; ++i) {
      const auto t = Clock::now();
      if (!r.launch().ok() || !r.wait().ok()) return 1;
      us.push_back(seconds_since(t) * 1e6);
    }
    const double total = seconds_since(start);
    std::ofstream out(argv[5]);
    out << total << "\n";
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

void register_processes() {
  benchmark::RegisterBenchmark("time_to_load/daemon start until it serves", [](benchmark::State& s) {
    for (auto _ : s) {
      const auto t = Clock::now();
      auto d = kad::testing::Daemon::start();
      if (!d.ok()) return s.SkipWithError(d.status().ToString().c_str());
      s.SetIterationTime(seconds_since(t));
    }
  })->UseManualTime()->Iterations(3)->Unit(benchmark::kMillisecond);
  for (const std::string mode : {"shm", "grpc-unix"}) {
    benchmark::RegisterBenchmark(
        (mode + "/time_to_load/new client's connect and first launch of a cached kernel").c_str(),
        [mode](benchmark::State& s) {
          const std::string uri = daemon().uri(mode);
          time_process({g_self, "--worker", "first-launch", uri});  // compiles once, in kad
          for (auto _ : s) {
            const double t = time_process({g_self, "--worker", "first-launch", uri});
            if (t < 0) return s.SkipWithError("worker failed");
            s.SetIterationTime(t);
          }
        })->UseManualTime()->Iterations(5)->Unit(benchmark::kMillisecond);
  }
  benchmark::RegisterBenchmark(
      "raw/time_to_load/fresh process that sets up PoCL and compiles the kernel itself",
      [](benchmark::State& s) {
        setenv("POCL_KERNEL_CACHE", "0", 1);  // no help from PoCL's disk cache
        for (auto _ : s) {
          const double t = time_process({g_self, "--worker", "standalone"});
          if (t < 0) return s.SkipWithError("worker failed");
          s.SetIterationTime(t);
        }
        unsetenv("POCL_KERNEL_CACHE");
      })->UseManualTime()->Iterations(3)->Unit(benchmark::kMillisecond);

  // concurrency: client processes launching on one device at once.
  const std::vector<int> counts = g_full ? std::vector<int>{1, 2, 4, 8, 16, 32}
                                         : std::vector<int>{1, 4, 16, 32};
  for (int clients : counts) {
    benchmark::RegisterBenchmark(
        absl::StrFormat("shm/concurrency/clients:%d", clients).c_str(),
        [clients](benchmark::State& s) {
          const int launches = g_full ? 1000 : 200;
          for (auto _ : s) {
            std::vector<pid_t> pids;
            std::vector<std::string> files;
            const auto t = Clock::now();
            for (int c = 0; c < clients; ++c) {
              files.push_back(absl::StrFormat("/tmp/kad-bench-lat-%d-%d", getpid(), c));
              pids.push_back(kad::testing::spawn({g_self, "--worker", "latency",
                                                  daemon().uri("shm"), std::to_string(launches),
                                                  files.back()}));
            }
            bool ok = true;
            for (pid_t p : pids) ok &= kad::testing::wait_exit(p) == 0;
            const double wall = seconds_since(t);
            if (!ok) return s.SkipWithError("a client failed");
            std::vector<double> latencies, rates;
            for (const std::string& f : files) {
              std::ifstream in(f);
              double total, us;
              in >> total;
              rates.push_back(launches / total);
              while (in >> us) latencies.push_back(us);
              std::filesystem::remove(f);
            }
            std::sort(latencies.begin(), latencies.end());
            const double sum = std::accumulate(rates.begin(), rates.end(), 0.0);
            double squares = 0;
            for (double r : rates) squares += r * r;
            s.SetIterationTime(wall);
            s.counters["launches_per_s"] = clients * launches / wall;
            s.counters["p50_us"] = latencies[latencies.size() / 2];
            s.counters["p99_us"] = latencies[latencies.size() * 99 / 100];
            s.counters["jain"] = sum * sum / (clients * squares);
          }
        })->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 2 && std::strcmp(argv[1], "--worker") == 0) return worker(argc, argv);
  g_self = std::filesystem::canonical("/proc/self/exe").string();
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--profile=full") == 0) g_full = true;
    else if (std::strcmp(argv[i], "--profile=quick") != 0) args.push_back(argv[i]);
  }
  int n = static_cast<int>(args.size());
  register_all();
  register_processes();
  benchmark::Initialize(&n, args.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
