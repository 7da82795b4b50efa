// DESIGN §7 with worker processes (§8): a warm launch on a device served by
// a worker allocates nothing in the daemon (the IsolatedDevice on this
// thread) nor in the worker. The worker is tests/support/counting_worker.cc,
// which reports its serving thread's allocations (and its queues' executors',
// on PoCL's basic driver) when it ends: a session of 100 warm launches and
// one of 400 must leave the same count behind, so the launches themselves
// allocated nothing there.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/launch.h"
#include "gtest/gtest.h"
#include "server/worker/isolated_device.h"
#include "server/worker/wide_builds.h"
#include "tests/support/alloc_counter.h"
#include "tests/support/pocl.h"
#include "tests/support/test_kernels.h"

namespace kad {
namespace {

using server::worker::IsolatedDevice;
using server::worker::WorkerPool;
using testing::AllocCounter;

constexpr int64_t kElements = 1024;

// kAffineKernel's result after `loops` steps per item that change nothing
// but its time: launches long enough (a few ms) to run on a queue's own
// thread in a worker on PoCL's basic driver (launch_executor.h).
constexpr char kSlowAffineKernel[] = R"(
kernel void affine(KAD_CONTEXT, global int* out, int seed, int k, int loops) {
  if (!kad_active()) return;
  float f = 0.0f;
  for (int i = 0; i < loops; ++i) f = f * 0.999f + 1.0f;
  out[kad_global_linear()] = (int)kad_global_linear() * seed + k + (f < 0.0f ? 1 : 0);
}
)";

struct SessionCounts {
  uint64_t daemon_allocs = 0;  // this thread, over the warm launches
  uint64_t worker_allocs = 0;  // the worker's serving thread, over its whole life
};

class WorkerAllocations : public ::testing::Test {
 protected:
  void SetUp() override {
    report_ = absl::StrCat(::testing::TempDir(), "kad-worker-allocs-", getpid());
    setenv("KAD_WORKER_ALLOC_REPORT", report_.c_str(), 1);
  }
  void TearDown() override {
    pool_.reset();  // the spares end, and write their last reports
    for (const auto& e : std::filesystem::directory_iterator(::testing::TempDir()))
      if (absl::StartsWith(e.path().string(), report_)) std::filesystem::remove(e.path());
  }
  void start_workers(const std::string& pocl_driver) {
    server::worker::WorkerOptions options{.command = {KAD_COUNTING_WORKER_PATH, {}}, .spares = 0};
    server::worker::set_pocl_worker_driver(options, pocl_driver);
    pool_ = std::make_unique<WorkerPool>(std::move(options));
  }

  // One session's device, `launches` warm synchronous launches (of
  // kSlowAffineKernel with `loops`, if any), then the worker's report once
  // the device is gone.
  SessionCounts session(int launches, int32_t loops = 0) {
    SessionCounts out;
    auto device = std::make_unique<IsolatedDevice>(testing::pocl_device(), *pool_);
    auto module = Module::create(ModuleFormat::kOpenClC,
                                 loops > 0 ? kSlowAffineKernel : testing::kAffineKernel);
    EXPECT_TRUE(module.ok()) << module.status();
    std::vector<ArgSpec> specs{ArgSpec::buffer(), ArgSpec::scalar_of(ScalarType::kI32),
                               ArgSpec::scalar_of(ScalarType::kI32)};
    if (loops > 0) specs.push_back(ArgSpec::scalar_of(ScalarType::kI32));
    auto kernel = Kernel::create(*module, {"affine", std::nullopt, std::nullopt, specs, ""});
    EXPECT_TRUE(kernel.ok()) << kernel.status();
    auto queue = device->create_queue();
    auto buffer = device->allocate(kElements * sizeof(int32_t));
    EXPECT_TRUE(queue.ok() && buffer.ok()) << queue.status() << buffer.status();
    if (!kernel.ok() || !queue.ok() || !buffer.ok()) return out;
    const pid_t pid = device->worker_pid();
    EXPECT_GT(pid, 0);

    const NdRange range{Dims{kElements}};
    auto launch_and_wait = [&](int32_t k) {
      const KernelArg args[] = {KernelArg::of_buffer(**buffer), KernelArg::of_scalar<int32_t>(3),
                                KernelArg::of_scalar<int32_t>(k),
                                KernelArg::of_scalar<int32_t>(loops)};
      const size_t nargs = loops > 0 ? 4 : 3;
      absl::StatusOr<LaunchResult> r =
          launch(**kernel, **queue, cache_, {&range, nullptr, std::span(args, nargs)});
      return r.ok() ? (*queue)->wait(r->event) : r.status();
    };
    for (int32_t k = 0; k < 3; ++k) EXPECT_TRUE(launch_and_wait(k).ok());  // compiles, loads
    {
      AllocCounter counter;
      for (int32_t k = 0; k < launches; ++k) {
        if (absl::Status s = launch_and_wait(k); !s.ok()) {
          ADD_FAILURE() << s;
          break;
        }
      }
      out.daemon_allocs = counter.counts().kad_allocs;
    }
    std::vector<int32_t> host(kElements);
    EXPECT_TRUE((*queue)->read_buffer(**buffer, 0, std::as_writable_bytes(std::span(host))).ok());
    for (int64_t i = 0; i < kElements; ++i)
      EXPECT_EQ(host[static_cast<size_t>(i)], static_cast<int32_t>(i) * 3 + launches - 1);

    queue->reset();
    buffer->reset();
    device.reset();  // the worker ends by itself and reports
    const std::string report = absl::StrCat(report_, ".", pid);
    std::ifstream in(report);
    EXPECT_TRUE(in >> out.worker_allocs) << "worker " << pid << " wrote no report";
    std::filesystem::remove(report);
    return out;
  }

  // Sessions of `few` and of `many` warm launches (of kSlowAffineKernel
  // with `loops`, if any) leave the same count in the worker and none in the
  // daemon. Two sessions before the counted ones: the cache holds the
  // kernel, and lazily made state (PoCL's, the allocator's) is in place in
  // the daemon.
  void expect_no_allocation_per_launch(int few, int many, int32_t loops = 0) {
    session(10, loops);
    session(10, loops);
    // A kernel's build for the wide device, which a worker asked for, is
    // made on a thread of kad's (wide_builds.h), once: the counted
    // sessions' workers are handed it as it is.
    for (int i = 0; i < 3000 && !pool_->wide_builds().idle(); ++i)
      absl::SleepFor(absl::Milliseconds(10));
    ASSERT_TRUE(pool_->wide_builds().idle());
    const SessionCounts a = session(few, loops);
    const SessionCounts b = session(many, loops);
    EXPECT_EQ(a.daemon_allocs, 0u) << "the daemon's side of a worker launch allocated";
    EXPECT_EQ(b.daemon_allocs, 0u) << "the daemon's side of a worker launch allocated";
    EXPECT_GT(a.worker_allocs, 0u) << "the worker's count sees its set-up";
    EXPECT_EQ(b.worker_allocs, a.worker_allocs)
        << many - few << " more warm launches (" << loops << " loops) allocated in the worker";
  }

  std::string report_;
  std::unique_ptr<WorkerPool> pool_;
  KernelCache cache_;
};

TEST_F(WorkerAllocations, AWarmLaunchAllocatesNothingInTheDaemonOrTheWorker) {
  start_workers("pthread");
  expect_no_allocation_per_launch(100, 400);
}

// On PoCL's basic driver a queue's short launches run on the worker's
// request loop, its long ones on the queue's own thread, and on pthread
// beside it with several work-groups (launch_executor.h): none allocates
// per launch.
TEST_F(WorkerAllocations, AWarmLaunchOnPoclsBasicDriverAllocatesNothingInTheWorker) {
  start_workers("basic");
  expect_no_allocation_per_launch(100, 400);
  // Launches of a few ms each (4000 loops for each of 1024 items).
  expect_no_allocation_per_launch(20, 80, 4000);
}

}  // namespace
}  // namespace kad
