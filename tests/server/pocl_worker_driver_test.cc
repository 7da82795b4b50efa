// --pocl-worker-driver: PoCL's CPU device in workers on PoCL's `basic`
// driver runs each kernel in a thread of the worker, inside the enqueue,
// where `pthread` hands it to a pool of PoCL's threads. Short launches run
// on the worker's request loop; a long kernel's on its queue's own thread
// (launch_executor.h), so that the worker's requests and its other queues
// go on while it runs, and with several work-groups on PoCL's pthread pool
// beside basic. A request behind a queue whose launches fill every slot
// waits for the kernel in progress: kad must not take that worker for one
// that stopped answering.
#include <sys/types.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/launch.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/worker/isolated_device.h"
#include "server/worker/launch_executor.h"
#include "server/worker/wide_builds.h"
#include "tests/support/pocl.h"

namespace kad {
namespace {

using server::worker::IsolatedDevice;
using server::worker::WideBuilds;
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

// Launches `kernel` with `n` loops on a new queue and buffer of `device`,
// in one work-group (on basic it never goes to the wide device), and waits
// for it.
absl::Status launch_and_wait(IsolatedDevice& device, Kernel& kernel, KernelCache& cache,
                             int32_t n) {
  auto queue = device.create_queue();
  if (!queue.ok()) return queue.status();
  auto buffer = device.allocate(16 * sizeof(float));
  if (!buffer.ok()) return buffer.status();
  const NdRange range{Dims{16}};
  const Dims one_group{16};
  const KernelArg args[] = {KernelArg::of_buffer(**buffer), KernelArg::of_scalar<int32_t>(n)};
  auto r = launch(kernel, **queue, cache, {&range, &one_group, args});
  if (!r.ok()) return r.status();
  return (*queue)->wait(r->event);
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

// A kernel of 2 s on a queue whose launches are long (they run on its
// executor): a request of the same session (an allocation, which the worker
// imports) and a launch of the same kernel on its other queue are answered
// while it runs, in the same worker.
TEST(PoclWorkerDriver, OnBasicARequestAndAnotherQueuesLaunchAreServedWhileAKernelRuns) {
  WorkerPool pool(options_on("basic"));
  IsolatedDevice device(testing::pocl_device(), pool);
  std::unique_ptr<Kernel> kernel = slow_kernel();
  ASSERT_NE(kernel, nullptr);
  KernelCache cache;
  // 2 s by the calibration: under load the kernel ran a third shorter than
  // its probe said (a run with three tests at once on 2 cores).
  const int32_t n = loops_for(device, *kernel, cache, 2.0);
  ASSERT_GT(n, 0);

  auto queue = device.create_queue();
  auto other_queue = device.create_queue();
  auto buffer = device.allocate(16 * sizeof(float));
  ASSERT_TRUE(queue.ok() && other_queue.ok() && buffer.ok());
  const pid_t worker = device.worker_pid();
  const NdRange range{Dims{16}};
  const Dims one_group{16};  // on basic: never on the wide device
  // A launch of about 20 ms: the queue's launches are long.
  const KernelArg long_args[] = {KernelArg::of_buffer(**buffer),
                                 KernelArg::of_scalar<int32_t>(std::max(n / 75, 1))};
  auto warm = launch(*kernel, **queue, cache, {&range, &one_group, long_args});
  ASSERT_TRUE(warm.ok() && (*queue)->wait(warm->event).ok());
  const KernelArg args[] = {KernelArg::of_buffer(**buffer), KernelArg::of_scalar<int32_t>(n)};
  const absl::Time start = absl::Now();
  auto r = launch(*kernel, **queue, cache, {&range, &one_group, args});
  ASSERT_TRUE(r.ok()) << r.status();
  absl::SleepFor(absl::Milliseconds(100));  // the worker is inside the kernel

  absl::Time asked = absl::Now();
  auto second = device.allocate(16 * sizeof(float));  // a request: import the memory
  const absl::Duration allocated_after = absl::Now() - asked;
  ASSERT_TRUE(second.ok()) << second.status();
  asked = absl::Now();
  const KernelArg short_args[] = {KernelArg::of_buffer(**second), KernelArg::of_scalar<int32_t>(1)};
  auto s = launch(*kernel, **other_queue, cache, {&range, &one_group, short_args});
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
  // Both long before the kernel's end (it ran 2 s, at least 1.9 s after them).
  EXPECT_LT(allocated_after, absl::Milliseconds(500)) << "the kernel ran " << kernel_ran;
  EXPECT_LT(other_queue_after, absl::Milliseconds(500)) << "the kernel ran " << kernel_ran;
  EXPECT_GT(kernel_ran, absl::Seconds(1)) << "the kernel was too short to tell";
}

// CPU time to the nanosecond, not in /proc/PID/stat's clock ticks (10 ms:
// the rounding of the six readings of a WhereItRan put up to 20 ms of the
// loop's CPU time in the pool's, and failed a run where none was there). Of a thread: the first
// field of its schedstat.
absl::Duration cpu_time(pid_t pid, pid_t tid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/task/", tid, "/schedstat"));
  int64_t ns = -1;
  if (!(in >> ns)) {
    ADD_FAILURE() << "no schedstat of thread " << tid << " of " << pid << " (it ended?)";
    return absl::ZeroDuration();
  }
  return absl::Nanoseconds(ns);
}
// Of a whole process, its threads that ended included: its CPU clock.
absl::Duration cpu_time(pid_t pid) {
  clockid_t clock{};
  timespec t{};
  if (clock_getcpuclockid(pid, &clock) != 0 || clock_gettime(clock, &t) != 0) {
    ADD_FAILURE() << "no CPU clock of " << pid << " (it ended?)";
    return absl::ZeroDuration();
  }
  return absl::DurationFromTimespec(t);
}

// The threads of `pid` named `name`.
std::vector<pid_t> threads_named(pid_t pid, const std::string& name) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& t :
       std::filesystem::directory_iterator(absl::StrCat("/proc/", pid, "/task"), ec)) {
    std::string comm;
    std::getline(std::ifstream(t.path() / "comm"), comm);
    if (comm == name) out.push_back(std::stoi(t.path().filename().string()));
  }
  return out;
}

// Where launches of about 300 ms ran in a worker, by CPU time: its request
// loop (the main thread), the queue's own thread, or PoCL's pool of the
// wide device.
struct WhereItRan {
  absl::Duration loop, queue, pool;
  std::string where() const {
    const absl::Duration most = std::max({loop, queue, pool});
    if (most < absl::Milliseconds(50)) return "nowhere";
    if (most == loop && loop > 2 * (queue + pool)) return "loop";
    if (most == queue && queue > 2 * (loop + pool)) return "queue";
    if (most == pool && pool > 2 * (loop + queue)) return "pool";
    return absl::StrCat("mixed: loop ", absl::FormatDuration(loop), ", queue ",
                        absl::FormatDuration(queue), ", pool ", absl::FormatDuration(pool));
  }
};

// A queue and a buffer of a session in a worker on `driver`, and a slow_kernel().
class QueueInWorker {
 public:
  explicit QueueInWorker(const std::string& driver = "basic")
      : driver_(driver),
        own_pool_(std::in_place, options_on(driver)),
        pool_(*own_pool_),
        device_(testing::pocl_device(), pool_) {}
  // A session of `pool`'s, whose kernel is the one of `nonce`.
  QueueInWorker(WorkerPool& pool, std::string nonce)
      : driver_("basic"),
        nonce_(std::move(nonce)),
        pool_(pool),
        device_(testing::pocl_device(), pool_) {}
  // A queue and a buffer; `n` loops of about `seconds` (0 on failure).
  int32_t start(double seconds) {
    kernel_ = nonce_.empty() ? slow_kernel() : slow_kernel(nonce_);
    if (kernel_ == nullptr) return 0;
    const int32_t n = loops_for(device_, *kernel_, cache_, seconds);
    worker_ = device_.worker_pid();
    // The calibration's queues are released, but their threads may not have
    // ended yet, nor this queue's have taken its name: this queue's is the
    // one that was not there before it (a CI run under load took a
    // calibration queue's, which then ended while measured).
    const std::vector<pid_t> before = threads_named(worker_, "kad-queue");
    auto queue = device_.create_queue();
    auto buffer = device_.allocate(kItems * sizeof(float));
    if (!queue.ok() || !buffer.ok()) return 0;
    queue_ = *std::move(queue);
    buffer_ = *std::move(buffer);
    if (driver_ != "basic") return n;  // queues have no thread of their own
    for (int i = 0; i < 500 && executor_ == 0; ++i) {
      for (const pid_t t : threads_named(worker_, "kad-queue"))
        if (std::find(before.begin(), before.end(), t) == before.end()) executor_ = t;
      if (executor_ == 0) absl::SleepFor(absl::Milliseconds(10));
    }
    // Measured from now on: the calibration's threads are gone by then.
    for (int i = 0; i < 500 && threads_named(worker_, "kad-queue").size() != 1; ++i)
      absl::SleepFor(absl::Milliseconds(10));
    return executor_ != 0 ? n : 0;
  }
  // `loops` on each of kItems items, in work-groups of `group` items.
  void run(int32_t loops, uint64_t group = kItems) {
    const NdRange range{Dims{kItems}};
    const Dims workgroup{static_cast<int64_t>(group)};
    const KernelArg args[] = {KernelArg::of_buffer(*buffer_), KernelArg::of_scalar<int32_t>(loops)};
    auto r = launch(*kernel_, *queue_, cache_, {&range, &workgroup, args});
    EXPECT_TRUE(r.ok() && queue_->wait(r->event).ok()) << loops << " loops";
  }
  WhereItRan ran(int32_t loops, uint64_t group = kItems) { return ran_many(loops, 1, group); }
  // Whether a compile worker made a build for the wide device, or found
  // none, within 30 s (the first launch after it gets it).
  bool wide_build_ended() const {
    for (int i = 0; i < 3000; ++i) {
      const WideBuilds::Stats s = pool_.wide_builds().stats();
      if (s.built + s.failed > 0) return true;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return false;
  }
  // Whether launches of `loops` in work-groups of one item come to run on
  // PoCL's pool (the wide device) within 30 s.
  bool goes_wide(int32_t loops) {
    run(1);  // short, of one work-group
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (absl::Now() < deadline) {
      if (ran(loops, 1).where() == "pool") return true;
    }
    return false;
  }
  // `times` launches, one after the other.
  WhereItRan ran_many(int32_t loops, int times, uint64_t group = kItems) {
    const pid_t executor = executor_;
    const absl::Duration loop = cpu_time(worker_, worker_);
    const absl::Duration queue = executor != 0 ? cpu_time(worker_, executor) : absl::ZeroDuration();
    const absl::Duration all = cpu_time(worker_);
    for (int i = 0; i < times; ++i) run(loops, group);
    WhereItRan out;
    out.loop = cpu_time(worker_, worker_) - loop;
    out.queue = executor != 0 ? cpu_time(worker_, executor) - queue : absl::ZeroDuration();
    out.pool = cpu_time(worker_) - all - out.loop - out.queue;
    return out;
  }

  WideBuilds::Stats wide_builds() const { return pool_.wide_builds().stats(); }

  static constexpr uint64_t kItems = 16;

 private:
  std::string driver_;
  std::string nonce_;  // empty: a kernel of its own
  std::optional<WorkerPool> own_pool_;
  WorkerPool& pool_;
  IsolatedDevice device_;
  KernelCache cache_;
  std::unique_ptr<Kernel> kernel_;
  std::unique_ptr<Queue> queue_;
  std::unique_ptr<Buffer> buffer_;
  pid_t worker_ = 0;
  pid_t executor_ = 0;  // the queue's thread in the worker
};

// Where a queue's launches run on basic: on the worker's request loop (its
// main thread) while they are short; after a long one, on the queue's own
// thread (one work-group: one core on either driver); after a short one
// there, on the loop's again.
TEST(PoclWorkerDriver, OnBasicAQueueRunsLaunchesOnTheLoopsThreadUntilOneIsLong) {
  QueueInWorker q;
  const int32_t n = q.start(0.3);
  ASSERT_GT(n, 0);
  q.run(1);
  EXPECT_EQ(q.ran(n).where(), "loop") << "the first long launch, after short ones";
  EXPECT_EQ(q.ran(n).where(), "queue") << "a launch after a long one";
  q.run(1);  // short, on the queue's thread
  EXPECT_EQ(q.ran(n).where(), "loop") << "a launch after a short one";
}

// On basic, the launches of several work-groups of a kernel whose last two
// launches were long on their thread's CPU clock try PoCL's pthread driver beside it (the wide
// device), whose pool spreads them over every core, and stay there while it is faster
// (wide_choice.h); a launch of one work-group does not. The kernel's build for the wide device is
// made beside its launches, which go on on one core meanwhile. When the kernel's launches become
// short, a sample on one core brings it back there.
TEST(PoclWorkerDriver, OnBasicALongKernelsLaunchesOfSeveralWorkGroupsRunOnPoclsPool) {
  QueueInWorker q;
  const int32_t n = q.start(0.3);
  ASSERT_GT(n, 0);
  q.run(1);  // short, of one work-group: the kernel's launches are short
  const WhereItRan first = q.ran(n, 1);
  EXPECT_EQ(first.where(), "loop") << "the first long launch";
  // A launch's CPU time on one core, whatever the calibration made of the
  // machine's load (a run of three suites at once made 0.3 s of wall time
  // under 150 ms of CPU).
  const absl::Duration on_one_core = first.loop;
  // The first long launch counts only once the next is timed on its
  // thread's CPU clock (wide_choice.h): two of those in a row are worth a try.
  EXPECT_EQ(q.ran(n, 1).where(), "queue") << "the second, on one core still";
  EXPECT_EQ(q.ran(n, 1).where(), "queue") << "the third, on one core still";
  // The fourth wants the wide device: it runs on one core, and the worker
  // asks kad for the kernel's build there. kad has a compile worker make
  // it when it writes the fifth, which runs on one core meanwhile.
  const WhereItRan asking = q.ran(n, 1);
  EXPECT_GT(asking.queue, on_one_core / 2) << asking.where();
  const WhereItRan during_build = q.ran(n, 1);
  EXPECT_GT(during_build.queue, on_one_core / 2) << during_build.where();
  ASSERT_TRUE(q.wide_build_ended());
  EXPECT_EQ(q.wide_builds().built, 1u);
  // The worker is handed the build with the next launch.
  // PoCL's pthread build of this kernel is several times faster than its
  // basic one (more than the cores): a launch there is well under one
  // core's, even on a busy machine.
  // The first there may build its work-group function on the queue's thread.
  const WhereItRan first_wide = q.ran(n, 1);
  EXPECT_GT(first_wide.pool, absl::Milliseconds(50)) << first_wide.where();
  // Then a sample there, measured faster. On a busy machine (the suite runs
  // two tests at once) it may not be: the kernel tries again, less often
  // each time. Three launches in a row on the pool: it is there (on one
  // core, the pool gets a sample at most, after the first one's warm-up).
  int in_a_row = 1;
  for (int i = 0; i < 30 && in_a_row < 3; ++i)
    in_a_row = q.ran(n, 1).where() == "pool" ? in_a_row + 1 : 0;
  ASSERT_EQ(in_a_row, 3) << "measured faster there";
  EXPECT_EQ(q.ran(n).where(), "queue") << "a launch of one work-group after a long one";
  q.run(1);  // short, of one work-group
  EXPECT_EQ(q.ran(n, 1).where(), "pool") << "the kernel is on the wide device";
  // Short launches of 16 work-groups: at most an interval of them on the
  // pool (25-50 µs each), then one on one core that is far faster, which
  // brings the kernel back.
  q.ran_many(1, 100, 1);
  // As in OnBasicShortLaunchesRunWithoutPoclsPool: 4000 short launches
  // take PoCL's pool more than 20 ms of CPU time on pthread (75-95 ms on the 2-core VM).
  EXPECT_LT(q.ran_many(1, 4000, 1).pool, absl::Milliseconds(20)) << "back on one core";
}

// A kernel's build for the wide device is made by a compile worker, once
// per key for every session's worker (no session's worker builds code that
// another loads): a second session's worker that wants it is handed the
// same build, and a kad started later (a new pool) finds it in its code cache.
TEST(PoclWorkerDriver, OnBasicAKernelsBuildForTheWideDeviceIsMadeOnceForEverySession) {
  const std::string nonce = new_nonce();
  WorkerPool pool(options_on("basic"));
  QueueInWorker first(pool, nonce), second(pool, nonce);
  const int32_t n = first.start(0.15);
  ASSERT_GT(n, 0);
  ASSERT_TRUE(first.goes_wide(n));
  ASSERT_GT(second.start(0.15), 0);
  ASSERT_TRUE(second.goes_wide(n));
  WideBuilds::Stats made = pool.wide_builds().stats();
  EXPECT_EQ(made.built, 1u) << "built again for the second session";
  EXPECT_EQ(made.failed, 0u);
  EXPECT_EQ(made.given, 2u);

  WorkerPool later(options_on("basic"));
  QueueInWorker third(later, nonce);
  ASSERT_GT(third.start(0.15), 0);
  ASSERT_TRUE(third.goes_wide(n));
  made = later.wide_builds().stats();
  EXPECT_EQ(made.built, 0u) << "a restarted kad built it again";
  EXPECT_EQ(made.from_cache, 1u);
  EXPECT_EQ(made.given, 1u);
}

// The builds for the wide device that kad keeps for later wants are
// charged to its host-memory guard (a client can make a program binary of
// tens of MiB), and given back when kad drops them.
TEST(PoclWorkerDriver, OnBasicTheWideBuildsKadKeepsAreChargedToItsHostMemoryGuard) {
  std::atomic<int64_t> charged{0};
  WorkerOptions options = options_on("basic");
  options.charge_host_memory = [&charged](uint64_t bytes) -> absl::StatusOr<std::shared_ptr<void>> {
    charged += static_cast<int64_t>(bytes);
    return std::shared_ptr<void>(
        nullptr, [&charged, bytes](void*) { charged -= static_cast<int64_t>(bytes); });
  };
  {
    WorkerPool pool(options);
    {
      QueueInWorker q(pool, new_nonce());
      const int32_t n = q.start(0.15);
      ASSERT_GT(n, 0);
      ASSERT_TRUE(q.goes_wide(n));
    }
    // The session is gone, and its kernel with it: what is charged now is
    // the wide build kad keeps.
    const uint64_t kept = pool.wide_builds().stats().kept_bytes;
    EXPECT_GT(kept, 0u);
    EXPECT_EQ(charged.load(), static_cast<int64_t>(kept));
  }
  EXPECT_EQ(charged.load(), 0) << "kad stopped and kept a charge";
}

// Short launches on basic run on the worker's request loop, not on a pool
// of PoCL's threads as on pthread (a hand-off and a wake-up there and back
// per launch): of 16 work-groups here, after a long launch of the kernel
// (the calibration's) too.
TEST(PoclWorkerDriver, OnBasicShortLaunchesRunWithoutPoclsPool) {
  for (const std::string driver : {"pthread", "basic"}) {
    QueueInWorker q(driver);
    ASSERT_GT(q.start(0.001), 0) << driver;
    absl::Duration pool;
    for (int round = 0; round < 4; ++round) pool += q.ran_many(1, 1000, 1).pool;
    if (driver == "pthread") {
      EXPECT_GT(pool, absl::Milliseconds(20)) << "PoCL's pool on pthread, 4000 launches";
    } else {
      EXPECT_LT(pool, absl::Milliseconds(20)) << "PoCL's pool on basic, 4000 short launches";
    }
  }
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
