// Discovery against the real HSA runtime: on a machine without an AMD GPU
// (no /dev/kfd, as here and in CI) no device and exactly one log line saying
// why; a missing or foreign library is one line too.
#include <filesystem>

#include "backends/hsa/hsa_api.h"
#include "backends/hsa/hsa_backend.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kad::hsa {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(HsaDiscovery, AMissingLibraryIsOneLogLineAndNoDevice) {
  BackendDiscovery d = discover({.library = "libkad-no-such-hsa-runtime.so.1"});
  EXPECT_TRUE(d.devices.empty());
  ASSERT_EQ(d.log.size(), 1u);
  EXPECT_THAT(d.log[0], StartsWith("hsa: library missing: "));
  EXPECT_THAT(d.log[0], HasSubstr("libkad-no-such-hsa-runtime.so.1"));
}

TEST(HsaDiscovery, ALibraryWithoutTheRuntimesFunctionsIsOneLogLine) {
  BackendDiscovery d = discover({.library = "libm.so.6"});
  EXPECT_TRUE(d.devices.empty());
  ASSERT_EQ(d.log.size(), 1u);
  EXPECT_THAT(d.log[0], StartsWith("hsa: unusable runtime: "));
  EXPECT_THAT(d.log[0], HasSubstr("has no symbol hsa_init"));
}

TEST(HsaDiscovery, TheInstalledRuntimeHasEveryFunctionOfTheTable) {
  absl::StatusOr<HsaApi> api = load_hsa_runtime();
  ASSERT_TRUE(api.ok()) << api.status() << " (is libhsa-runtime64-1 installed?)";
  EXPECT_EQ(api->origin, "libhsa-runtime64.so.1");
#define KAD_EXPECT_LOADED(name) EXPECT_NE(api->name, nullptr) << #name;
  KAD_HSA_FUNCTIONS(KAD_EXPECT_LOADED)
#undef KAD_EXPECT_LOADED
}

TEST(HsaDiscovery, WithoutAnAmdGpuTheRealRuntimeGivesOneLineAndNoDevice) {
  if (std::filesystem::exists("/dev/kfd")) {
    GTEST_SKIP() << "this machine has the amdgpu driver: see DevicesHaveStableIdsAndLimits";
  }
  BackendDiscovery d = discover();
  EXPECT_TRUE(d.devices.empty());
  ASSERT_EQ(d.log.size(), 1u);
  EXPECT_THAT(d.log[0], AnyOf(StartsWith("hsa: hsa_init failed"), StartsWith("hsa: no GPU agent")));
  // The runtime's reason, by name.
  EXPECT_THAT(d.log[0], AnyOf(HasSubstr("HSA_STATUS_"), HasSubstr("CPU agents")));
}

TEST(HsaDiscovery, DevicesHaveStableIdsAndLimits) {
  if (!std::filesystem::exists("/dev/kfd")) GTEST_SKIP() << "no AMD GPU driver (/dev/kfd)";
  BackendDiscovery d = discover();
  ASSERT_FALSE(d.devices.empty()) << (d.log.empty() ? "" : d.log[0]);
  for (size_t i = 0; i < d.devices.size(); ++i) {
    const DeviceInfo& info = d.devices[i]->info();
    EXPECT_EQ(info.backend, "hsa");
    EXPECT_EQ(info.id, "hsa:" + std::to_string(i));
    EXPECT_THAT(info.toolchain_version, HasSubstr("gfx"));
    EXPECT_THAT(info.formats,
                ::testing::ElementsAre(ModuleFormat::kOpenClC, ModuleFormat::kAmdgcnCodeObject));
    EXPECT_GE(info.limits.max_workgroup_size, 256u);
    EXPECT_GT(info.limits.compute_units, 0u);
    EXPECT_GT(info.limits.local_memory_bytes, 0u);
    EXPECT_GT(info.limits.global_memory_bytes, 0u);
  }
}

}  // namespace
}  // namespace kad::hsa
