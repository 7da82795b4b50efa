// launch/*: the cost of one synchronous launch (launch + wait) of a small
// kernel, side by side: the raw OpenCL API (the floor), kad in process, and a
// real kad daemon over shared memory, gRPC on a UNIX socket and gRPC on
// loopback TCP. The seed of the benchmark suite (issue "Benchmark suite").
#include <benchmark/benchmark.h>
#include <signal.h>

#include <CL/cl.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "backends/registry.h"
#include "core/kernel.h"
#include "core/launch.h"
#include "kad/client.h"
#include "tests/support/daemon.h"

namespace {

constexpr int64_t kItems = 64;
constexpr char kScale[] = R"(
kernel void scale(KAD_CONTEXT, global float* x, float a) {
  if (kad_active()) x[kad_global_linear()] *= a;
}
)";

// ---- raw/: OpenCL called directly -------------------------------------------------

void BM_RawOpenCl(benchmark::State& state) {
  cl_platform_id platform;
  cl_device_id device;
  clGetPlatformIDs(1, &platform, nullptr);
  clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, nullptr);
  cl_int err;
  cl_context ctx = clCreateContext(nullptr, 1, &device, nullptr, nullptr, &err);
  cl_command_queue q = clCreateCommandQueue(ctx, device, 0, &err);
  const char* src =
      "kernel void scale(global float* x, float a) { x[get_global_id(0)] *= a; }";
  cl_program p = clCreateProgramWithSource(ctx, 1, &src, nullptr, &err);
  clBuildProgram(p, 1, &device, "", nullptr, nullptr);
  cl_kernel k = clCreateKernel(p, "scale", &err);
  cl_mem x = clCreateBuffer(ctx, CL_MEM_READ_WRITE, kItems * sizeof(float), nullptr, &err);
  const float a = 1.0f;
  const size_t global = kItems, local = kItems;
  for (auto _ : state) {
    clSetKernelArg(k, 0, sizeof(cl_mem), &x);
    clSetKernelArg(k, 1, sizeof(float), &a);
    cl_event e;
    clEnqueueNDRangeKernel(q, k, 1, nullptr, &global, &local, 0, nullptr, &e);
    clWaitForEvents(1, &e);
    clReleaseEvent(e);
  }
  clReleaseMemObject(x);
  clReleaseKernel(k);
  clReleaseProgram(p);
  clReleaseCommandQueue(q);
  clReleaseContext(ctx);
}
BENCHMARK(BM_RawOpenCl)->Name("raw/launch/dynamic ndrange")->UseRealTime();

// ---- inproc/: the pipeline in this process ------------------------------------------

void BM_InProcess(benchmark::State& state) {
  static kad::DeviceRegistry* registry = new kad::DeviceRegistry(kad::discover_devices());
  kad::Device& device = *registry->default_device();
  auto queue = *device.create_queue();
  auto module = *kad::Module::create(kad::ModuleFormat::kOpenClC, kScale);
  auto kernel = *kad::Kernel::create(
      module, {"scale", std::nullopt, std::nullopt,
               {kad::ArgSpec::buffer(), kad::ArgSpec::scalar_of(kad::ScalarType::kF32)}, ""});
  auto x = *device.allocate(kItems * sizeof(float));
  kad::KernelCache cache;
  const kad::KernelArg args[] = {kad::KernelArg::of_buffer(*x), kad::KernelArg::of_scalar(1.0f)};
  const kad::NdRange range(kad::Dims{kItems});
  for (auto _ : state) {
    auto r = kad::launch(*kernel, *queue, cache, {&range, nullptr, args});
    if (!r.ok() || !queue->wait(r->event).ok()) state.SkipWithError("launch failed");
  }
}
BENCHMARK(BM_InProcess)->Name("inproc/launch/dynamic ndrange")->UseRealTime();

// ---- through a kad daemon ------------------------------------------------------------

kad::testing::Daemon& daemon() {
  static auto* d = [] {
    auto started = kad::testing::Daemon::start();
    if (!started.ok()) {
      std::fprintf(stderr, "%s\n", started.status().ToString().c_str());
      std::abort();
    }
    return started->release();
  }();
  return *d;
}

void run_client(benchmark::State& state, const std::string& uri) {
  auto client = kad::Client::connect(uri, "bench");
  if (!client.ok()) return state.SkipWithError(std::string(client.status().message()).c_str());
  auto queue = *(*client)->create_queue();
  auto module = *(*client)->load_module(kScale);
  auto kernel = *(*client)->get_kernel(
      module, {.entry = "scale",
               .args = {kad::client::ArgSpec::buffer(),
                        kad::client::ArgSpec::scalar_of(kad::client::ScalarType::kF32)}});
  auto x = *(*client)->allocate(kItems * sizeof(float));
  const kad::client::Arg args[] = {kad::client::Arg::buffer(x), kad::client::Arg::scalar(1.0f)};
  const kad::client::Dims range{kItems};
  for (auto _ : state) {
    auto r = queue->launch(kernel, &range, nullptr, args);
    if (!r.ok() || !queue->wait(r->event).ok()) state.SkipWithError("launch failed");
  }
}

void BM_Shm(benchmark::State& state) { run_client(state, daemon().unix_uri() + "?transport=shm"); }
void BM_GrpcUnix(benchmark::State& state) {
  run_client(state, daemon().unix_uri() + "?transport=grpc");
}
void BM_GrpcTcp(benchmark::State& state) { run_client(state, daemon().tcp_uri()); }
BENCHMARK(BM_Shm)->Name("shm/launch/dynamic ndrange")->UseRealTime();
BENCHMARK(BM_GrpcUnix)->Name("grpc-unix/launch/dynamic ndrange")->UseRealTime();
BENCHMARK(BM_GrpcTcp)->Name("grpc-tcp/launch/dynamic ndrange")->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
