// The null device (backends/null/): off by default, served with
// --null-device, and driven through kad's whole pipeline like any device —
// its kernels do nothing, its buffers hold what is written.
#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "tests/e2e/e2e.h"

namespace kad {
namespace {

using client::Arg;
using client::ArgSpec;
using testing::bytes_of;

TEST(NullDevice, IsServedOnlyWhenAskedFor) {
  auto plain = testing::Daemon::start();
  ASSERT_TRUE(plain.ok()) << plain.status();
  auto c = Client::connect((*plain)->unix_uri(), "null");
  ASSERT_TRUE(c.ok()) << c.status();
  auto devices = (*c)->devices();
  ASSERT_TRUE(devices.ok()) << devices.status();
  for (const auto& d : *devices) EXPECT_NE(d.id, "null:0");
  EXPECT_EQ((*c)->create_queue("null:0").status().code(), absl::StatusCode::kNotFound);
}

TEST(NullDevice, RunsThePipelineWithKernelsThatDoNothing) {
  auto daemon = testing::Daemon::start({"--null-device"});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto c = Client::connect((*daemon)->unix_uri(), "null");
  ASSERT_TRUE(c.ok()) << c.status();
  Client& client = **c;
  auto devices = client.devices();
  ASSERT_TRUE(devices.ok()) << devices.status();
  bool found = false;
  for (const auto& d : *devices) {
    if (d.id != "null:0") continue;
    found = true;
    EXPECT_EQ(d.backend, "null");
    EXPECT_FALSE(d.is_default) << "PoCL stays the default device";
    EXPECT_EQ(d.max_workgroup_size, 1024u);
  }
  ASSERT_TRUE(found) << "--null-device serves null:0";

  auto queue = client.create_queue("null:0");
  ASSERT_TRUE(queue.ok()) << queue.status();
  auto buffer = client.allocate(64 * sizeof(int32_t), "null:0");
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  std::vector<int32_t> fresh(64, -1);
  ASSERT_TRUE((*queue)->read(*buffer, 0, bytes_of(fresh)).ok());
  EXPECT_EQ(fresh, std::vector<int32_t>(64, 0)) << "fresh memory is zeroed";
  std::vector<int32_t> x(64);
  for (int i = 0; i < 64; ++i) x[static_cast<size_t>(i)] = i;
  ASSERT_TRUE((*queue)->write(*buffer, 0, bytes_of(x)).ok());

  auto module = client.load_module(R"(
kernel void bump(KAD_CONTEXT, global int* x, int k) {
  if (kad_active()) x[kad_global_linear()] += k;
})");
  ASSERT_TRUE(module.ok()) << module.status();
  auto kernel = client.get_kernel(
      *module,
      {.entry = "bump", .args = {ArgSpec::buffer(), ArgSpec::scalar_of(client::ScalarType::kI32)}});
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const Arg args[] = {Arg::buffer(*buffer), Arg::scalar<int32_t>(5)};
  auto ran = (*queue)->run(*kernel, client::Dims{64}, nullptr, args);
  ASSERT_TRUE(ran.ok()) << ran.status();
  EXPECT_EQ(ran->event, 1u);
  const client::Dims range{64};
  for (int i = 0; i < 100; ++i) ASSERT_TRUE((*queue)->submit(*kernel, &range, nullptr, args).ok());
  ASSERT_TRUE((*queue)->wait().ok());
  // Past the device's depth (64), the queue asks whether launches ended
  // (Queue::ended): here each has, so none waited in kad for a slot.
  auto status = client.status();
  ASSERT_TRUE(status.ok()) << status.status();
  for (const auto& d : status->devices) {
    if (d.id == "null:0") {
      EXPECT_EQ(d.held_total, 0u) << "launches held in kad";
    }
  }
  std::vector<int32_t> back(64, -1);
  ASSERT_TRUE((*queue)->read(*buffer, 0, bytes_of(back)).ok());
  EXPECT_EQ(back, x) << "the kernel did nothing; the buffer kept what was written";

  // kad's checks still apply: a workgroup past the device's limit.
  const client::Dims too_big{2048};
  auto refused = (*queue)->run(*kernel, client::Dims{4096}, &too_big, args);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << refused.status();
  auto huge = client.allocate(uint64_t{2} << 30, "null:0");
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted) << huge.status();

  // Its memory (256 MiB, host memory in kad) runs out, and comes back when freed.
  auto most = client.allocate(uint64_t{200} << 20, "null:0");
  ASSERT_TRUE(most.ok()) << most.status();
  auto more = client.allocate(uint64_t{100} << 20, "null:0");
  EXPECT_EQ(more.status().code(), absl::StatusCode::kResourceExhausted) << more.status();
  EXPECT_THAT(std::string(more.status().message()),
              ::testing::HasSubstr("null:0 is out of memory"));
  ASSERT_TRUE(client.free(*most).ok());
  auto again = client.allocate(uint64_t{100} << 20, "null:0");
  EXPECT_TRUE(again.ok()) << again.status();
}

}  // namespace
}  // namespace kad
