// HSA status translation, and the kernel limits and tuning the backend
// derives from code object metadata.
#include "backends/hsa/hsa_kernel.h"
#include "backends/hsa/hsa_status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kad::hsa {
namespace {

using ::testing::HasSubstr;

TEST(HsaStatus, SuccessAndABreakOutOfAnIterationAreOk) {
  EXPECT_TRUE(hsa_status(HSA_STATUS_SUCCESS, "hsa_init").ok());
  EXPECT_TRUE(hsa_status(HSA_STATUS_INFO_BREAK, "hsa_iterate_agents").ok());
}

TEST(HsaStatus, NamesTheCallTheErrorItsCodeAndTheContext) {
  absl::Status s = hsa_status(HSA_STATUS_ERROR_OUT_OF_RESOURCES, "hsa_queue_create", "hsa:0");
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(), "hsa_queue_create: HSA_STATUS_ERROR_OUT_OF_RESOURCES (0x1008): hsa:0");
}

TEST(HsaStatus, BadCodeObjectsAndArgumentsAreInvalidArgument) {
  for (hsa_status_t code :
       {HSA_STATUS_ERROR_INVALID_CODE_OBJECT, HSA_STATUS_ERROR_INVALID_ARGUMENT,
        HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS, HSA_STATUS_ERROR_INVALID_SYMBOL_NAME}) {
    EXPECT_EQ(hsa_status(code, "call").code(), absl::StatusCode::kInvalidArgument)
        << status_name(code);
  }
}

TEST(HsaStatus, DeviceFaultsAbortTheCommandWithTheAmdErrorName) {
  absl::Status s =
      hsa_status(static_cast<hsa_status_t>(HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION), "queue");
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(std::string(s.message()), HasSubstr("HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION"));
  EXPECT_EQ(hsa_status(HSA_STATUS_ERROR_EXCEPTION, "queue").code(), absl::StatusCode::kAborted);
}

TEST(HsaStatus, AnUnknownCodeIsInternalAndShowsItsValue) {
  absl::Status s = hsa_status(static_cast<hsa_status_t>(0x7777), "hsa_init");
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(s.message(), "hsa_init: unknown HSA status (0x7777)");
  EXPECT_EQ(hsa_status(HSA_STATUS_ERROR_NOT_INITIALIZED, "x").code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(KernelLimits, TheCompilersFlatWorkgroupLimitBoundsTheDevicesOne) {
  KernelMetadata k;
  k.max_flat_workgroup_size = 256;
  k.wavefront_size = 64;
  k.group_segment_fixed_size = 512;
  DeviceLimits device;
  device.max_workgroup_size = 1024;
  device.subgroup_width = 64;
  KernelLimits limits = kernel_limits(k, device);
  EXPECT_EQ(limits.max_workgroup_size, 256u);
  EXPECT_EQ(limits.preferred_multiple, 64u);
  EXPECT_EQ(limits.local_memory_bytes, 512u);
  k.max_flat_workgroup_size = 2048;
  EXPECT_EQ(kernel_limits(k, device).max_workgroup_size, 1024u);
}

TEST(LaunchConfiguration, TakesTheKernelsLimitInWholeWavefronts) {
  KernelLimits limits;
  limits.max_workgroup_size = 256;
  limits.preferred_multiple = 64;
  EXPECT_EQ(choose_workgroup_size(limits, 1 << 20, 1024), 256u);
  EXPECT_EQ(choose_workgroup_size(limits, 1 << 20, 200), 192u);  // the caller's cap
  EXPECT_EQ(choose_workgroup_size(limits, 100, 1024), 128u);     // no more than needed
  EXPECT_EQ(choose_workgroup_size(limits, 10, 1024), 64u);
  EXPECT_EQ(choose_workgroup_size(limits, 0, 1024), 64u);
  EXPECT_EQ(choose_workgroup_size(limits, 1 << 20, 48), 48u);  // under one wavefront
  EXPECT_EQ(choose_workgroup_size(limits, 1 << 20, 0), 1u);
  limits.max_workgroup_size = 1024;
  EXPECT_EQ(choose_workgroup_size(limits, 1 << 20, 1024), 1024u);
}

}  // namespace
}  // namespace kad::hsa
