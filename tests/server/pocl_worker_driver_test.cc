// --pocl-worker-driver: PoCL's CPU device in workers on PoCL's `basic`
// driver runs each kernel in the worker's own thread, inside the enqueue,
// where `pthread` hands it to a pool of PoCL's threads. That thread is the
// queue's executor (launch_executor.h): the worker's requests and its other
// queues go on while a kernel runs. A request behind a queue whose launches
// fill every slot waits for the kernel in progress: kad must not take that
// worker for one that stopped answering.
#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/launch.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/worker/isolated_device.h"
#include "server/worker/launch_executor.h"
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
      // The worker's own: its request loop and its queue's executor.
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

// How many loops of slow_kernel() make a launch of about `seconds` on
// `device` (the kernel compiled and loaded by the way).
int32_t loops_for(IsolatedDevice& device, Kernel& kernel, KernelCache& cache, double seconds) {
  if (!launch_and_wait(device, kernel, cache, 1).ok()) return 0;
  constexpr int32_t kProbe = 2'000'000;
  const absl::Time start = absl::Now();
  if (!launch_and_wait(device, kernel, cache, kProbe).ok()) return 0;
  const double probe_s = absl::ToDoubleSeconds(absl::Now() - start);
  return static_cast<int32_t>(std::min(2.0e9, kProbe * seconds / std::max(probe_s, 1e-4)));
}

// A kernel of 1.5 s on a queue whose launches are long (they run on its
// executor): a request of the same session (an allocation, which the worker
// imports) and a launch of the same kernel on its other queue are answered
// while it runs, in the same worker.
TEST(PoclWorkerDriver, OnBasicARequestAndAnotherQueuesLaunchAreServedWhileAKernelRuns) {
  WorkerPool pool(options_on("basic"));
  IsolatedDevice device(testing::pocl_device(), pool);
  std::unique_ptr<Kernel> kernel = slow_kernel();
  ASSERT_NE(kernel, nullptr);
  KernelCache cache;
  const int32_t n = loops_for(device, *kernel, cache, 1.5);
  ASSERT_GT(n, 0);

  auto queue = device.create_queue();
  auto other_queue = device.create_queue();
  auto buffer = device.allocate(16 * sizeof(float));
  ASSERT_TRUE(queue.ok() && other_queue.ok() && buffer.ok());
  const pid_t worker = device.worker_pid();
  const NdRange range{Dims{16}};
  // A launch of about 20 ms: the queue's launches are long.
  const KernelArg long_args[] = {KernelArg::of_buffer(**buffer),
                                 KernelArg::of_scalar<int32_t>(std::max(n / 75, 1))};
  auto warm = launch(*kernel, **queue, cache, {&range, nullptr, long_args});
  ASSERT_TRUE(warm.ok() && (*queue)->wait(warm->event).ok());
  const KernelArg args[] = {KernelArg::of_buffer(**buffer), KernelArg::of_scalar<int32_t>(n)};
  const absl::Time start = absl::Now();
  auto r = launch(*kernel, **queue, cache, {&range, nullptr, args});
  ASSERT_TRUE(r.ok()) << r.status();
  absl::SleepFor(absl::Milliseconds(100));  // the worker is inside the kernel

  absl::Time asked = absl::Now();
  auto second = device.allocate(16 * sizeof(float));  // a request: import the memory
  const absl::Duration allocated_after = absl::Now() - asked;
  ASSERT_TRUE(second.ok()) << second.status();
  asked = absl::Now();
  const KernelArg short_args[] = {KernelArg::of_buffer(**second), KernelArg::of_scalar<int32_t>(1)};
  auto s = launch(*kernel, **other_queue, cache, {&range, nullptr, short_args});
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE((*other_queue)->wait(s->event).ok());
  const absl::Duration other_queue_after = absl::Now() - asked;
  std::vector<float> out(16, -1.0f);
  ASSERT_TRUE(
      (*other_queue)->read_buffer(**second, 0, std::as_writable_bytes(std::span(out))).ok());
  EXPECT_EQ(out[0], 1.0f) << "x = 0 * 0.999 + 1 after one step";

  EXPECT_TRUE((*queue)->wait(r->event).ok());
  const absl::Duration kernel_ran = absl::Now() - start;
  EXPECT_EQ(device.worker_pid(), worker);
  // Both long before the kernel's end (it ran 1.5 s, at least 1.4 s after them).
  EXPECT_LT(allocated_after, absl::Milliseconds(500)) << "the kernel ran " << kernel_ran;
  EXPECT_LT(other_queue_after, absl::Milliseconds(500)) << "the kernel ran " << kernel_ran;
  EXPECT_GT(kernel_ran, absl::Seconds(1)) << "the kernel was too short to tell";
}

// CPU time a thread of `pid` has used (user and system).
absl::Duration cpu_time(pid_t pid, pid_t tid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/task/", tid, "/stat"));
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Fields after the name (which may hold spaces) from the state on: utime
  // and stime are the 12th and 13th.
  std::istringstream rest(stat.substr(stat.rfind(')') + 2));
  std::string field;
  uint64_t utime = 0, stime = 0;
  for (int i = 1; i <= 13 && rest >> field; ++i) {
    if (i == 12) utime = std::stoull(field);
    if (i == 13) stime = std::stoull(field);
  }
  return absl::Seconds(static_cast<double>(utime + stime) / sysconf(_SC_CLK_TCK));
}

// The thread of `pid` named `name` (0 if none).
pid_t thread_named(pid_t pid, const std::string& name) {
  std::error_code ec;
  for (const auto& t :
       std::filesystem::directory_iterator(absl::StrCat("/proc/", pid, "/task"), ec)) {
    std::string comm;
    std::getline(std::ifstream(t.path() / "comm"), comm);
    if (comm == name) return std::stoi(t.path().filename().string());
  }
  return 0;
}

// Where a queue's launches run on basic: on the worker's request loop (its
// main thread) while they are short; after a long one, on the queue's own
// thread; after a short one there, on the loop's again. Seen by each
// thread's CPU time over launches of about 300 ms.
TEST(PoclWorkerDriver, OnBasicAQueueRunsLaunchesOnTheLoopsThreadUntilOneIsLong) {
  WorkerPool pool(options_on("basic"));
  IsolatedDevice device(testing::pocl_device(), pool);
  std::unique_ptr<Kernel> kernel = slow_kernel();
  ASSERT_NE(kernel, nullptr);
  KernelCache cache;
  const int32_t n = loops_for(device, *kernel, cache, 0.3);
  ASSERT_GT(n, 0);
  auto queue = device.create_queue();
  auto buffer = device.allocate(16 * sizeof(float));
  ASSERT_TRUE(queue.ok() && buffer.ok());
  const pid_t worker = device.worker_pid();
  const NdRange range{Dims{16}};
  auto run = [&](int32_t loops) {
    const KernelArg args[] = {KernelArg::of_buffer(**buffer), KernelArg::of_scalar<int32_t>(loops)};
    auto r = launch(*kernel, **queue, cache, {&range, nullptr, args});
    EXPECT_TRUE(r.ok() && (*queue)->wait(r->event).ok()) << loops << " loops";
  };
  run(1);
  const pid_t executor = thread_named(worker, "kad-queue");
  ASSERT_NE(executor, 0) << "no executor thread in the worker";
  // Which thread ran a launch of n loops: the one whose CPU time grew by
  // most of it.
  auto ran_on = [&] {
    const absl::Duration loop_before = cpu_time(worker, worker);
    const absl::Duration queue_before = cpu_time(worker, executor);
    run(n);
    const absl::Duration on_loop = cpu_time(worker, worker) - loop_before;
    const absl::Duration on_queue = cpu_time(worker, executor) - queue_before;
    if (on_loop > 2 * on_queue + absl::Milliseconds(50)) return std::string("loop");
    if (on_queue > 2 * on_loop + absl::Milliseconds(50)) return std::string("queue");
    return absl::StrCat("neither (loop ", absl::FormatDuration(on_loop), ", queue ",
                        absl::FormatDuration(on_queue), ")");
  };
  EXPECT_EQ(ran_on(), "loop") << "the first long launch, after short ones";
  EXPECT_EQ(ran_on(), "queue") << "a launch after a long one";
  run(1);  // short, on the queue's thread
  EXPECT_EQ(ran_on(), "loop") << "a launch after a short one";
}

// A kernel that never ends, on basic, and launches behind it on its queue
// that fill every slot of the queue's executor: the worker's request loop
// waits for a slot, and a request behind it waits until the running
// launch's deadline, not its own (longer) one. The worker is stopped there,
// the launch reported past its deadline, and the session goes on in a new
// worker.
TEST(PoclWorkerDriver, OnBasicARequestBehindAFullQueueOfALoopingKernelEndsAtTheLaunchsDeadline) {
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
  absl::StatusOr<LaunchResult> first;
  for (uint64_t i = 0; i <= server::worker::LaunchExecutor::kSlots; ++i) {
    auto r = launch(**kernel, **queue, cache, {&range, nullptr, args});
    ASSERT_TRUE(r.ok()) << "launch " << i + 1 << ": " << r.status();
    if (i == 0) first = r;
  }
  absl::SleepFor(absl::Milliseconds(100));  // the loop waits for a slot
  const absl::Time asked = absl::Now();
  auto refused = device.allocate(4096);
  const absl::Duration waited = absl::Now() - asked;
  EXPECT_FALSE(refused.ok());
  EXPECT_LT(waited, absl::Seconds(10)) << "the request waited for its own deadline";
  const absl::Status ended = (*queue)->wait(first->event);
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
