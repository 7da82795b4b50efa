// --pocl-worker-driver: PoCL's CPU device in workers on PoCL's `basic`
// driver runs each kernel in the worker's own thread, inside the enqueue,
// where `pthread` hands it to a pool of PoCL's threads. A request from kad
// then waits for the kernel in progress: kad must not take that worker for
// one that stopped answering.
#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/launch.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/worker/isolated_device.h"
#include "tests/support/pocl.h"

namespace kad {
namespace {

using server::worker::IsolatedDevice;
using server::worker::WorkerOptions;
using server::worker::WorkerPool;

// A nonce that makes a module no code cache has seen.
std::string new_nonce() {
  std::random_device random;
  return absl::StrCat(random(), random());
}

// out[i] = x after n steps of x = x * 0.999 + 1 from out[i]: time grows with n.
std::unique_ptr<Kernel> slow_kernel(const std::string& nonce = new_nonce()) {
  auto module =
      Module::create(ModuleFormat::kOpenClC,
                     absl::StrCat("// nonce ", nonce, "\n",
                                  "kernel void slow(KAD_CONTEXT, global float* out, int n) {\n"
                                  "  if (!kad_active()) return;\n"
                                  "  float x = out[kad_global_linear()];\n"
                                  "  for (int i = 0; i < n; ++i) x = x * 0.999f + 1.0f;\n"
                                  "  out[kad_global_linear()] = x;\n}\n"));
  if (!module.ok()) return nullptr;
  auto kernel = Kernel::create(*module, {"slow",
                                         std::nullopt,
                                         std::nullopt,
                                         {ArgSpec::buffer(), ArgSpec::scalar_of(ScalarType::kI32)},
                                         ""});
  return kernel.ok() ? *std::move(kernel) : nullptr;
}

WorkerOptions options_on(const std::string& driver) {
  WorkerOptions options{.command = {KAD_DAEMON_PATH, {}}, .spares = 0};
  server::worker::set_pocl_worker_driver(options, driver);
  return options;
}

// The names of a process's threads.
std::vector<std::string> thread_names(pid_t pid) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& t :
       std::filesystem::directory_iterator(absl::StrCat("/proc/", pid, "/task"), ec)) {
    std::string name;
    std::getline(std::ifstream(t.path() / "comm"), name);
    names.push_back(name);
  }
  return names;
}

// Launches `kernel` with `n` loops on a new queue and buffer of `device`,
// and waits for it.
absl::Status launch_and_wait(IsolatedDevice& device, Kernel& kernel, KernelCache& cache,
                             int32_t n) {
  auto queue = device.create_queue();
  if (!queue.ok()) return queue.status();
  auto buffer = device.allocate(16 * sizeof(float));
  if (!buffer.ok()) return buffer.status();
  const NdRange range{Dims{16}};
  const KernelArg args[] = {KernelArg::of_buffer(**buffer), KernelArg::of_scalar<int32_t>(n)};
  auto r = launch(kernel, **queue, cache, {&range, nullptr, args});
  if (!r.ok()) return r.status();
  return (*queue)->wait(r->event);
}

TEST(PoclWorkerDriver, OnBasicAWorkerRunsKernelsWithoutAThreadPoolOfPocls) {
  size_t threads_on_pthread = 0;
  for (const std::string driver : {"pthread", "basic"}) {
    // A kernel per driver: a program binary built for one is no binary on
    // the other (CL_INVALID_BINARY), which the code cache's key keeps apart.
    std::unique_ptr<Kernel> kernel = slow_kernel();
    ASSERT_NE(kernel, nullptr);
    KernelCache cache;
    WorkerPool pool(options_on(driver));
    IsolatedDevice device(testing::pocl_device(), pool);
    // One queue, kept while the threads are counted (its reaper stays).
    auto queue = device.create_queue();
    auto buffer = device.allocate(16 * sizeof(float));
    ASSERT_TRUE(queue.ok() && buffer.ok());
    const NdRange range{Dims{16}};
    const KernelArg args[] = {KernelArg::of_buffer(**buffer), KernelArg::of_scalar<int32_t>(10)};
    auto r = launch(*kernel, **queue, cache, {&range, nullptr, args});
    ASSERT_TRUE(r.ok()) << driver << ": " << r.status();
    ASSERT_TRUE((*queue)->wait(r->event).ok()) << driver;
    const size_t threads = thread_names(device.worker_pid()).size();
    if (driver == "pthread") {
      threads_on_pthread = threads;
    } else {
      // The worker's own: its request loop and its queue's reaper.
      EXPECT_EQ(threads, 2u) << "threads of a worker on basic, " << threads_on_pthread
                             << " on pthread";
    }
  }
  EXPECT_GT(threads_on_pthread, 2u) << "PoCL's pool on pthread";
}

// kad's code cache keeps a program binary per driver: one built on
// pthread is no binary on basic (CL_INVALID_BINARY), and the same kernel
// on basic is built again for it.
TEST(PoclWorkerDriver, AKernelBuiltOnOneDriverIsBuiltAgainForTheOther) {
  const std::string nonce = new_nonce();
  for (const std::string driver : {"pthread", "basic", "pthread"}) {
    std::unique_ptr<Kernel> kernel = slow_kernel(nonce);  // the same module each time
    ASSERT_NE(kernel, nullptr);
    KernelCache cache;
    WorkerPool pool(options_on(driver));
    IsolatedDevice device(testing::pocl_device(), pool);
    const absl::Status launched = launch_and_wait(device, *kernel, cache, 10);
    EXPECT_TRUE(launched.ok()) << driver << ": " << launched;
  }
}

// A kernel that runs longer than kad waits for a worker's answer to a
// request: on basic the worker reads the request only once the kernel has
// ended. The request is answered, and the worker and its launch are kept.
TEST(PoclWorkerDriver, OnBasicARequestWaitsForTheKernelInProgressAndTheWorkerIsKept) {
  WorkerOptions options = options_on("basic");
  options.start_timeout = absl::Milliseconds(500);  // kad's wait for a free worker's answer
  WorkerPool pool(options);
  IsolatedDevice device(testing::pocl_device(), pool);
  std::unique_ptr<Kernel> kernel = slow_kernel();
  ASSERT_NE(kernel, nullptr);
  KernelCache cache;
  // How many loops make a launch of about 1.5 s here (compiled first).
  ASSERT_TRUE(launch_and_wait(device, *kernel, cache, 1).ok());
  constexpr int32_t kProbe = 2'000'000;
  absl::Time start = absl::Now();
  ASSERT_TRUE(launch_and_wait(device, *kernel, cache, kProbe).ok());
  const double probe_s = absl::ToDoubleSeconds(absl::Now() - start);
  const int32_t n = static_cast<int32_t>(std::min(2.0e9, kProbe * 1.5 / std::max(probe_s, 1e-4)));

  auto queue = device.create_queue();
  auto buffer = device.allocate(16 * sizeof(float));
  ASSERT_TRUE(queue.ok() && buffer.ok());
  const pid_t worker = device.worker_pid();
  const NdRange range{Dims{16}};
  const KernelArg args[] = {KernelArg::of_buffer(**buffer), KernelArg::of_scalar<int32_t>(n)};
  start = absl::Now();
  auto r = launch(*kernel, **queue, cache, {&range, nullptr, args});
  ASSERT_TRUE(r.ok()) << r.status();
  absl::SleepFor(absl::Milliseconds(100));  // the worker is inside the kernel
  const absl::Time asked = absl::Now();
  auto second = device.allocate(4096);  // a request to the worker: import the memory
  const absl::Duration answered_after = absl::Now() - asked;
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE((*queue)->wait(r->event).ok());
  EXPECT_EQ(device.worker_pid(), worker) << "the busy worker was taken for one that stopped";
  // The request did wait for the kernel, longer than for a free worker.
  EXPECT_GT(answered_after, options.start_timeout)
      << "the kernel ran " << absl::Now() - start << " with " << n << " loops";
}

// A kernel that never ends, on basic: a request behind it waits until the
// launch's deadline, not its own (longer) one; the worker is stopped there,
// the launch reported past its deadline, and the session goes on in a new
// worker.
TEST(PoclWorkerDriver, OnBasicARequestBehindALoopingKernelEndsAtTheLaunchsDeadline) {
  WorkerOptions options = options_on("basic");
  options.launch_timeout = absl::Seconds(2);  // kad's wait for a free worker: 30 s
  WorkerPool pool(options);
  IsolatedDevice device(testing::pocl_device(), pool);
  auto module =
      Module::create(ModuleFormat::kOpenClC,
                     absl::StrCat("// nonce ", new_nonce(), "\n",
                                  "kernel void spin(KAD_CONTEXT, global volatile int* "
                                  "flag) {\n"
                                  "  if (kad_active()) { while (flag[0] == 0) { } }\n}\n"));
  ASSERT_TRUE(module.ok()) << module.status();
  auto kernel =
      Kernel::create(*module, {"spin", std::nullopt, std::nullopt, {ArgSpec::buffer()}, ""});
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  KernelCache cache;
  auto queue = device.create_queue();
  auto flag = device.allocate(sizeof(int32_t));  // zeros: the kernel spins for good
  ASSERT_TRUE(queue.ok() && flag.ok());
  const pid_t worker = device.worker_pid();
  const NdRange range{Dims{1}};
  const KernelArg args[] = {KernelArg::of_buffer(**flag)};
  auto r = launch(**kernel, **queue, cache, {&range, nullptr, args});
  ASSERT_TRUE(r.ok()) << r.status();
  absl::SleepFor(absl::Milliseconds(100));  // the worker is inside the kernel
  const absl::Time asked = absl::Now();
  auto refused = device.allocate(4096);
  const absl::Duration waited = absl::Now() - asked;
  EXPECT_FALSE(refused.ok());
  EXPECT_LT(waited, absl::Seconds(10)) << "the request waited for its own deadline";
  const absl::Status ended = (*queue)->wait(r->event);
  EXPECT_EQ(ended.code(), absl::StatusCode::kDeadlineExceeded) << ended;
  EXPECT_THAT(std::string(ended.message()),
              ::testing::HasSubstr("kernel `spin` (launch 1) ran past the launch deadline of 2s"));
  // The session goes on in a new worker.
  auto again = device.allocate(4096);
  EXPECT_TRUE(again.ok()) << again.status();
  EXPECT_NE(device.worker_pid(), worker);
}

}  // namespace
}  // namespace kad
