// On a machine with a Level Zero device (an Intel GPU and its driver): the
// device's report, memory round trips, a launch through the whole pipeline
// and a failing build. Skipped elsewhere (CI, the build machines), where the
// discovery tests check the one-line report instead.
#include <cstdint>
#include <numeric>
#include <vector>

#include "backends/level_zero/level_zero_backend.h"
#include "core/kernel.h"
#include "core/kernel_cache.h"
#include "core/launch.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kad::level_zero {
namespace {

using ::testing::HasSubstr;

BackendDiscovery& found() {
  static BackendDiscovery* d = new BackendDiscovery(discover());
  return *d;
}

class LevelZeroDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (found().devices.empty()) {
      GTEST_SKIP() << "no Level Zero device: " << (found().log.empty() ? "" : found().log[0]);
    }
    device_ = found().devices.front().get();
    auto q = device_->create_queue();
    ASSERT_TRUE(q.ok()) << q.status();
    queue_ = *std::move(q);
  }

  std::unique_ptr<Kernel> make_kernel(const std::string& source, KernelSignature signature) {
    auto module = Module::create(ModuleFormat::kOpenClC, source);
    EXPECT_TRUE(module.ok()) << module.status();
    if (!module.ok()) return nullptr;
    auto kernel = Kernel::create(*module, std::move(signature));
    EXPECT_TRUE(kernel.ok()) << kernel.status();
    return kernel.ok() ? *std::move(kernel) : nullptr;
  }

  Device* device_ = nullptr;
  std::unique_ptr<Queue> queue_;
  KernelCache cache_;
};

TEST_F(LevelZeroDeviceTest, ReportsItsBackendIdFormatsAndLimits) {
  const DeviceInfo& info = device_->info();
  EXPECT_EQ(info.backend, "level_zero");
  EXPECT_THAT(info.id, ::testing::MatchesRegex("level_zero:[0-9]+:[0-9]+"));
  EXPECT_FALSE(info.name.empty());
  EXPECT_THAT(info.formats, ::testing::ElementsAre(ModuleFormat::kOpenClC, ModuleFormat::kSpirv,
                                                   ModuleFormat::kLlvmBitcodeSpir64));
  EXPECT_GE(info.limits.max_workgroup_size, 1u);
  EXPECT_GE(info.limits.max_groups[0], 1u);
  EXPECT_GT(info.limits.global_memory_bytes, 0u);
  EXPECT_GT(info.limits.max_allocation_bytes, 0u);
}

TEST_F(LevelZeroDeviceTest, WrittenBytesReadBackAtAnOffset) {
  auto buffer = device_->allocate(1024);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  std::vector<uint8_t> in(256);
  std::iota(in.begin(), in.end(), 0);
  ASSERT_TRUE(queue_->write_buffer(**buffer, 512, std::as_bytes(std::span(in))).ok());
  std::vector<uint8_t> out(256, 0xff);
  ASSERT_TRUE(queue_->read_buffer(**buffer, 512, std::as_writable_bytes(std::span(out))).ok());
  EXPECT_EQ(in, out);
}

TEST_F(LevelZeroDeviceTest, TunedLaunchThroughThePipelineWritesEveryIndex) {
  auto kernel = make_kernel(R"(
kernel void iota(KAD_CONTEXT, global long* out, long bias) {
  if (kad_active()) out[kad_global_linear()] = kad_global_linear() + bias;
}
)",
                            {"iota",
                             std::nullopt,
                             std::nullopt,
                             {ArgSpec::buffer(), ArgSpec::scalar_of(ScalarType::kI64)},
                             ""});
  ASSERT_NE(kernel, nullptr);
  const int64_t n = 10007;  // prime: padded and bounds-checked
  auto out = device_->allocate(n * sizeof(int64_t));
  ASSERT_TRUE(out.ok()) << out.status();
  const KernelArg args[] = {KernelArg::of_buffer(**out), KernelArg::of_scalar<int64_t>(5)};
  const NdRange range(Dims{n});
  for (int repeat = 0; repeat < 3; ++repeat) {
    auto r = launch(*kernel, *queue_, cache_, {&range, nullptr, args});
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(queue_->wait(r->event).ok());
  }
  std::vector<int64_t> got(n);
  ASSERT_TRUE(queue_->read_buffer(**out, 0, std::as_writable_bytes(std::span(got))).ok());
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], i + 5) << i;
  EXPECT_EQ(cache_.stats().compilations, 1u);
}

TEST_F(LevelZeroDeviceTest, MissingEntryIsAnErrorNamingTheKernelAndTheDevice) {
  auto kernel = make_kernel("kernel void other(KAD_CONTEXT) {}\n",
                            {"absent", std::nullopt, std::nullopt, {}, ""});
  ASSERT_NE(kernel, nullptr);
  const NdRange range(Dims{4});
  auto r = launch(*kernel, *queue_, cache_, {&range, nullptr, {}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("kernel `absent` on " + device_->info().id));
}

}  // namespace
}  // namespace kad::level_zero
