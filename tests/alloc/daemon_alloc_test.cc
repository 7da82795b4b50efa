// DESIGN §7 on the daemon side. The engine's warm launch path — decoding a
// kad.v1 Launch into fixed storage, resolving handles, launching — allocates
// nothing (asserted). The whole daemon's allocations per launch over a real
// Submit stream, gRPC included, are measured and reported.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>

#include "absl/strings/str_format.h"
#include "backends/registry.h"
#include "gtest/gtest.h"
#include "server/engine.h"
#include "server/kad_service.h"
#include "server/wire.h"
#include "tests/support/alloc_counter.h"
#include "tests/support/daemon.h"
#include "tests/support/in_process_daemon.h"
#include "tests/support/test_kernels.h"

namespace kad::server {
namespace {

using testing::AllocCounter;
using testing::AllocCounts;

TEST(DaemonAllocations, EngineWarmLaunchFromTheWireAllocatesNothing) {
  Engine engine(discover_devices(), EngineLimits{});
  auto session = engine.open_session("alloc", "test");
  ASSERT_TRUE(session.ok());
  Session& s = **session;
  auto queue = engine.create_queue(s, "");
  auto buffer = engine.allocate_buffer(s, "", 4096 * sizeof(int32_t));
  auto module = engine.load_module(s, ModuleFormat::kOpenClC, kad::testing::kAffineKernel);
  ASSERT_TRUE(queue.ok() && buffer.ok() && module.ok());
  KernelSignature sig{"affine",
                      std::nullopt,
                      std::nullopt,
                      {ArgSpec::buffer(), ArgSpec::scalar_of(ScalarType::kI32),
                       ArgSpec::scalar_of(ScalarType::kI32)},
                      ""};
  auto kernel = engine.get_kernel(s, module->handle, sig);
  ASSERT_TRUE(kernel.ok());

  v1::Launch wire;  // what arrives on the stream
  wire.set_kernel(*kernel);
  wire.mutable_ndrange()->add_extents(4096);
  wire.add_args()->set_buffer(buffer->handle);
  for (int32_t v : {3, 4}) {
    v1::KernelArg* a = wire.add_args();
    a->set_scalar_bits(static_cast<uint32_t>(v));
    a->set_scalar(v1::SCALAR_TYPE_I32);
  }
  auto one_launch = [&]() -> absl::Status {
    NdRange ndrange;
    std::array<KernelArg, kMaxKernelArgs> args;
    if (absl::Status st = to_ndrange(wire.ndrange(), &ndrange); !st.ok()) return st;
    for (int i = 0; i < wire.args_size(); ++i) {
      if (absl::Status st = to_kernel_arg(wire.args(i), static_cast<size_t>(i), &args[i]); !st.ok())
        return st;
    }
    absl::StatusOr<LaunchResult> r = engine.launch(
        s, {*queue, wire.kernel(), &ndrange, nullptr,
            std::span<const KernelArg>(args.data(), static_cast<size_t>(wire.args_size()))});
    if (!r.ok()) return r.status();
    return engine.wait(s, *queue, r->event);
  };
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(one_launch().ok());
  AllocCounter counter;
  constexpr int kLaunches = 500;
  for (int i = 0; i < kLaunches; ++i) ASSERT_TRUE(one_launch().ok());
  const AllocCounts c = counter.counts();
  std::printf("  engine: kad %.2f allocs/launch, driver on this thread %.2f allocs/launch\n",
              static_cast<double>(c.kad_allocs) / kLaunches,
              static_cast<double>(c.driver_allocs) / kLaunches);
  EXPECT_EQ(c.kad_allocs, 0u);
}

TEST(DaemonAllocations, WholeDaemonPerLaunchOverTheStreamIsReported) {
  // The daemon runs in this process; the client is another process, so every
  // allocation counted here is the daemon's.
  testing::InProcessDaemon daemon("alloc");
  ASSERT_TRUE(daemon.serving());

  auto run_client = [&](int launches) {
    AllocCounter counter;
    const pid_t pid = testing::spawn(
        {KAD_TEST_CLIENT_PATH, daemon.uri("grpc-unix"), "pipeline", std::to_string(launches)});
    EXPECT_EQ(testing::wait_exit(pid), 0);
    return counter.counts();
  };
  run_client(100);  // warm: compiles the kernel
  const AllocCounts small = run_client(200);
  const AllocCounts large = run_client(2200);
  const double per_launch = static_cast<double>(large.total_allocs - small.total_allocs) / 2000.0;
  const double driver =
      static_cast<double>(large.all_driver_allocs - small.all_driver_allocs) / 2000.0;
  const double bytes = static_cast<double>(large.total_bytes - small.total_bytes) / 2000.0;
  const std::string report = absl::StrFormat(
      "daemon: %.1f allocs/launch (%.0f B) over a gRPC Submit stream, of which %.1f in driver "
      "calls; the rest is gRPC and protobuf (kad's engine path: 0, asserted above)",
      per_launch, bytes, driver);
  std::printf("  %s\n", report.c_str());
  ::testing::Test::RecordProperty("daemon_allocs_per_launch", report);
}

}  // namespace
}  // namespace kad::server
