// DESIGN §7 over shared memory: a warm launch allocates nothing in kad's code
// on either side. Client side: this process launches through a real kad
// process. Daemon side: the daemon's engine and shared-memory listener run in
// this process while a client process launches; allocations on kad's channel
// threads are counted.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "absl/strings/str_format.h"
#include "backends/registry.h"
#include "gtest/gtest.h"
#include "kad/client.h"
#include "server/engine.h"
#include "server/kad_service.h"
#include "server/shm_listener.h"
#include "tests/support/alloc_counter.h"
#include "tests/support/daemon.h"
#include "tests/support/in_process_daemon.h"
#include "tests/support/test_kernels.h"

namespace kad {
namespace {

using client::Arg;
using client::ArgSpec;
using testing::AllocCounter;
using testing::AllocCounts;

TEST(ShmAllocations, ClientWarmLaunchAllocatesNothing) {
  auto daemon = testing::Daemon::start();
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto c = Client::connect((*daemon)->unix_uri() + "?transport=shm");
  ASSERT_TRUE(c.ok()) << c.status();
  auto queue = (*c)->create_queue();
  ASSERT_TRUE(queue.ok());
  ASSERT_TRUE((*queue)->shared_memory());
  auto module = (*c)->load_module(kad::testing::kAffineKernel);
  auto kernel = (*c)->get_kernel(
      *module, {.entry = "affine",
                .args = {ArgSpec::buffer(), ArgSpec::scalar_of(client::ScalarType::kI32),
                         ArgSpec::scalar_of(client::ScalarType::kI32)}});
  auto out = (*c)->allocate(1024 * sizeof(int32_t));
  ASSERT_TRUE(kernel.ok() && out.ok());
  const client::Dims range{1024};
  for (int k = 0; k < 3; ++k) {
    const Arg args[] = {Arg::buffer(*out), Arg::scalar<int32_t>(2), Arg::scalar<int32_t>(k)};
    ASSERT_TRUE((*queue)->launch(*kernel, &range, nullptr, args).ok());
  }
  constexpr int kLaunches = 1000;
  AllocCounter sync_counter;
  for (int k = 0; k < kLaunches; ++k) {
    const Arg args[] = {Arg::buffer(*out), Arg::scalar<int32_t>(2), Arg::scalar<int32_t>(k)};
    auto l = (*queue)->launch(*kernel, &range, nullptr, args);
    ASSERT_TRUE(l.ok());
    ASSERT_TRUE((*queue)->wait(l->event).ok());
  }
  const AllocCounts sync = sync_counter.counts();
  AllocCounter pipelined_counter;
  for (int k = 0; k < kLaunches; ++k) {
    const Arg args[] = {Arg::buffer(*out), Arg::scalar<int32_t>(2), Arg::scalar<int32_t>(k)};
    ASSERT_TRUE((*queue)->submit(*kernel, &range, nullptr, args).ok());
  }
  ASSERT_TRUE((*queue)->wait().ok());
  const AllocCounts pipelined = pipelined_counter.counts();
  std::printf("  client over shm: %.2f allocs/launch synchronous, %.2f pipelined\n",
              static_cast<double>(sync.kad_allocs) / kLaunches,
              static_cast<double>(pipelined.kad_allocs) / kLaunches);
  EXPECT_EQ(sync.kad_allocs, 0u);
  EXPECT_EQ(pipelined.kad_allocs, 0u);
  std::vector<int32_t> host(1024);
  ASSERT_TRUE((*queue)->read(*out, 0, std::as_writable_bytes(std::span(host))).ok());
  EXPECT_EQ(host[10], 10 * 2 + kLaunches - 1);
}

TEST(ShmAllocations, DaemonWarmLaunchAllocatesNothingOnItsChannelThreads) {
  testing::InProcessDaemon daemon("shm-alloc");
  ASSERT_TRUE(daemon.serving());

  auto run_client = [&](int launches) {
    AllocCounter counter;
    const pid_t pid = testing::spawn(
        {KAD_TEST_CLIENT_PATH, daemon.uri("shm"), "pipeline", std::to_string(launches)});
    EXPECT_EQ(testing::wait_exit(pid), 0);
    // The channel thread may still be finishing its last completion.
    for (int i = 0; i < 100 && daemon.shm().channels() > 0; ++i) usleep(10000);
    return counter.counts();
  };
  run_client(100);  // compiles the kernel
  const AllocCounts small = run_client(200);
  const AllocCounts large = run_client(2200);
  const double total = static_cast<double>(large.total_allocs - small.total_allocs) / 2000.0;
  const double driver =
      static_cast<double>(large.all_driver_allocs - small.all_driver_allocs) / 2000.0;
  std::printf(
      "  daemon over shm: kad's channel threads %lld allocs over 2000 extra launches; "
      "whole daemon %.1f allocs/launch, %.1f of them in driver calls\n",
      static_cast<long long>(large.service_allocs) - static_cast<long long>(small.service_allocs),
      total, driver);
  EXPECT_EQ(large.service_allocs, small.service_allocs)
      << "the daemon's warm shared-memory path allocated";
  // Not blind: a new session's first launch (its kernel's first lookup) allocates there.
  EXPECT_GT(small.service_allocs, 0u);
}

}  // namespace
}  // namespace kad
