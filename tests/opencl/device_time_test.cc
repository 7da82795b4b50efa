// Queue::device_times on PoCL's real queue: the driver's profiling
// timestamps, from which the fair-share scheduler charges each launch (DESIGN §8).
#include <chrono>
#include <optional>
#include <vector>

#include "backends/registry.h"
#include "gtest/gtest.h"
#include "tests/support/pocl.h"

namespace kad {
namespace {

using testing::PoclTest;

constexpr char kFill[] = R"(
kernel void fill(KAD_CONTEXT, global int* out, int value) {
  if (kad_active()) out[kad_global_linear()] = value;
}
)";

class DeviceTime : public PoclTest {
 protected:
  void SetUp() override {
    PoclTest::SetUp();
    out_ = make_buffer<int32_t>(kItems, 0);
    args_[0] = KernelArg::of_buffer(*out_);
    args_[1] = KernelArg::of_scalar(int32_t{7});
    kernel_ = make_kernel(kFill, {"fill",
                                  std::nullopt,
                                  std::nullopt,
                                  {ArgSpec::buffer(), ArgSpec::scalar_of(ScalarType::kI32)},
                                  ""});
  }
  EventId launch() {
    const NdRange range(Dims{kItems});
    absl::StatusOr<LaunchResult> r = run(*kernel_, &range, nullptr, args_);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->event : 0;
  }

  static constexpr int64_t kItems = 1 << 16;
  std::unique_ptr<Buffer> out_;
  KernelArg args_[2];
  std::unique_ptr<Kernel> kernel_;
};

TEST_F(DeviceTime, AnEndedLaunchReportsHowLongItRanOnTheDevice) {
  launch();  // compiled before the launch that is timed
  ASSERT_TRUE(queue().finish().ok());
  const auto before = std::chrono::steady_clock::now();
  const EventId event = launch();
  ASSERT_TRUE(queue().wait(event).ok());
  const auto wall = std::chrono::steady_clock::now() - before;
  const std::optional<DeviceTimes> t = queue().device_times(event);
  ASSERT_TRUE(t.has_value()) << "PoCL's queues are made with profiling on";
  EXPECT_GT(t->end_ns, t->start_ns);
  // The device ran it within the time the caller saw it take.
  EXPECT_LE(t->end_ns - t->start_ns, static_cast<uint64_t>(std::chrono::nanoseconds(wall).count()));
  // A later launch on the device's clock starts after this one ended.
  const EventId next = launch();
  ASSERT_TRUE(queue().wait(next).ok());
  const std::optional<DeviceTimes> later = queue().device_times(next);
  ASSERT_TRUE(later.has_value());
  EXPECT_GE(later->start_ns, t->end_ns);
}

TEST_F(DeviceTime, AnEventNeverIssuedOrNoLongerHeldReportsNothing) {
  const EventId first = launch();
  ASSERT_TRUE(queue().finish().ok());
  EXPECT_FALSE(queue().device_times(0).has_value()) << "no event";
  EXPECT_FALSE(queue().device_times(first + 1).has_value()) << "not issued yet";
  ASSERT_TRUE(queue().device_times(first).has_value());
  // The queue holds its newest 1024 events; the first is released after them.
  EventId last = first;
  for (int i = 0; i < 1024; ++i) last = launch();
  ASSERT_TRUE(queue().finish().ok());
  EXPECT_FALSE(queue().device_times(first).has_value()) << "released";
  EXPECT_TRUE(queue().device_times(last).has_value());
}

// A worker's devices (discovered with timed_queues off): its queues run
// launches as any, and take no timestamps, which nobody asks of them.
class UntimedQueues : public testing::DeviceTest {
 protected:
  void SetUp() override {
    // Kept for the process: the queue the fixture opens must go first.
    static DeviceRegistry* const registry = [] {
      DiscoveryConfig config;
      config.only_backend = "opencl";
      config.timed_queues = false;
      return new DeviceRegistry(discover_devices(config));
    }();
    Device* device = registry->find(testing::pocl_device().info().id);
    ASSERT_NE(device, nullptr) << testing::pocl_device().info().id;
    use_device(*device);
  }
};

TEST_F(UntimedQueues, LaunchesRunAndReportNoDeviceTimes) {
  auto out = make_buffer<int32_t>(1024, 0);
  KernelArg args[] = {KernelArg::of_buffer(*out), KernelArg::of_scalar(int32_t{7})};
  auto kernel = make_kernel(kFill, {"fill",
                                    std::nullopt,
                                    std::nullopt,
                                    {ArgSpec::buffer(), ArgSpec::scalar_of(ScalarType::kI32)},
                                    ""});
  const NdRange range(Dims{1024});
  absl::StatusOr<LaunchResult> r = run(*kernel, &range, nullptr, args);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(queue().wait(r->event).ok());
  EXPECT_EQ(download<int32_t>(*out), std::vector<int32_t>(1024, 7));
  EXPECT_FALSE(queue().device_times(r->event).has_value()) << "a queue without profiling";
}

}  // namespace
}  // namespace kad
