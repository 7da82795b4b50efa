// Device discovery: PoCL appears exactly once, whether the ICD loader lists
// it or kad loads it directly as the embedded default.
#include "backends/opencl/opencl_backend.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kad::opencl {
namespace {

using ::testing::HasSubstr;

int count_pocl(const Discovery& d) {
  int n = 0;
  for (const auto& dev : d.devices) n += dev->info().platform == kPoclPlatformName;
  return n;
}

TEST(Discovery, PoclAppearsOnceThroughTheIcdLoader) {
  Discovery d = discover();
  EXPECT_EQ(count_pocl(d), 1);
}

TEST(Discovery, PoclIsTheEmbeddedDefaultWithoutAnIcdLoader) {
  Discovery d = discover({.icd_loader = "libkad-no-such-icd-loader.so.1"});
  EXPECT_EQ(count_pocl(d), 1);
  ASSERT_FALSE(d.log.empty());
  EXPECT_THAT(d.log.front(), HasSubstr("ICD loader unavailable"));
  EXPECT_THAT(d.log.back(), HasSubstr("(embedded)"));
}

TEST(Discovery, EachMissingLibraryIsOneLogLine) {
  Discovery d = discover({.icd_loader = "libkad-no-such-icd-loader.so.1",
                          .embedded_pocl = "libkad-no-such-pocl.so.2"});
  EXPECT_TRUE(d.devices.empty());
  ASSERT_EQ(d.log.size(), 2u);
  EXPECT_THAT(d.log[0], HasSubstr("libkad-no-such-icd-loader.so.1"));
  EXPECT_THAT(d.log[1], HasSubstr("libkad-no-such-pocl.so.2"));
}

TEST(Discovery, DeviceLimitsAreQueriedFromTheDevice) {
  Discovery d = discover();
  ASSERT_FALSE(d.devices.empty());
  for (const auto& dev : d.devices) {
    const DeviceLimits& l = dev->info().limits;
    EXPECT_GE(l.max_workgroup_size, 1u) << dev->info().id;
    EXPECT_GE(l.max_workgroup_dims[0], 1u);
    EXPECT_GT(l.global_memory_bytes, 0u);
    EXPECT_GT(l.local_memory_bytes, 0u);
    EXPECT_GE(l.compute_units, 1u);
    EXPECT_FALSE(dev->info().toolchain_version.empty());
  }
}

}  // namespace
}  // namespace kad::opencl
