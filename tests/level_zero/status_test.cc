// Level Zero results as statuses: the result's own name, the call, the
// values, and a status code that follows the result.
#include "backends/level_zero/level_zero_status.h"
#include "gtest/gtest.h"

namespace kad::level_zero {
namespace {

TEST(LevelZeroStatus, EveryResultOfTheHeadersHasItsOwnName) {
  const std::pair<ze_result_t, const char*> results[] = {
      {ZE_RESULT_SUCCESS, "ZE_RESULT_SUCCESS"},
      {ZE_RESULT_NOT_READY, "ZE_RESULT_NOT_READY"},
      {ZE_RESULT_ERROR_DEVICE_LOST, "ZE_RESULT_ERROR_DEVICE_LOST"},
      {ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY, "ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY"},
      {ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY, "ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY"},
      {ZE_RESULT_ERROR_MODULE_BUILD_FAILURE, "ZE_RESULT_ERROR_MODULE_BUILD_FAILURE"},
      {ZE_RESULT_ERROR_MODULE_LINK_FAILURE, "ZE_RESULT_ERROR_MODULE_LINK_FAILURE"},
      {ZE_RESULT_ERROR_UNINITIALIZED, "ZE_RESULT_ERROR_UNINITIALIZED"},
      {ZE_RESULT_ERROR_UNSUPPORTED_FEATURE, "ZE_RESULT_ERROR_UNSUPPORTED_FEATURE"},
      {ZE_RESULT_ERROR_INVALID_ARGUMENT, "ZE_RESULT_ERROR_INVALID_ARGUMENT"},
      {ZE_RESULT_ERROR_INVALID_KERNEL_NAME, "ZE_RESULT_ERROR_INVALID_KERNEL_NAME"},
      {ZE_RESULT_ERROR_INVALID_GROUP_SIZE_DIMENSION,
       "ZE_RESULT_ERROR_INVALID_GROUP_SIZE_DIMENSION"},
      {ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_SIZE,
       "ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_SIZE"},
      {ZE_RESULT_ERROR_OVERLAPPING_REGIONS, "ZE_RESULT_ERROR_OVERLAPPING_REGIONS"},
      {ZE_RESULT_ERROR_UNKNOWN, "ZE_RESULT_ERROR_UNKNOWN"},
  };
  for (const auto& [result, name] : results) EXPECT_EQ(result_name(result), name);
}

TEST(LevelZeroStatus, UnknownValueIsSaidToBeUnknown) {
  EXPECT_EQ(result_name(static_cast<ze_result_t>(0x7abcdef0)), "unknown Level Zero result");
  const absl::Status s = ze_status(static_cast<ze_result_t>(0x7abcdef0), "zeInit");
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(s.message(), "zeInit: unknown Level Zero result (0x7abcdef0)");
}

TEST(LevelZeroStatus, SuccessIsOk) { EXPECT_TRUE(ze_status(ZE_RESULT_SUCCESS, "zeInit").ok()); }

TEST(LevelZeroStatus, MessageNamesTheCallTheResultItsValueAndTheContext) {
  const absl::Status s = ze_status(ZE_RESULT_ERROR_MODULE_BUILD_FAILURE, "zeModuleCreate",
                                   "kernel `saxpy` on level_zero:0:0 (Arc)");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "zeModuleCreate: ZE_RESULT_ERROR_MODULE_BUILD_FAILURE (0x70000004): kernel `saxpy` "
            "on level_zero:0:0 (Arc)");
  EXPECT_EQ(ze_status(ZE_RESULT_ERROR_UNINITIALIZED, "zeInit").message(),
            "zeInit: ZE_RESULT_ERROR_UNINITIALIZED (0x78000001)");
}

TEST(LevelZeroStatus, StatusCodeFollowsTheResult) {
  EXPECT_EQ(ze_status(ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY, "zeMemAllocDevice").code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(ze_status(ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY, "zeMemAllocDevice").code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(ze_status(ZE_RESULT_ERROR_DEVICE_LOST, "zeEventHostSynchronize").code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(ze_status(ZE_RESULT_ERROR_UNINITIALIZED, "zeInit").code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(ze_status(ZE_RESULT_ERROR_INVALID_KERNEL_NAME, "zeKernelCreate").code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(ze_status(ZE_RESULT_ERROR_INVALID_GROUP_SIZE_DIMENSION, "zeKernelSetGroupSize").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ze_status(ZE_RESULT_ERROR_UNSUPPORTED_FEATURE, "zeModuleCreate").code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(ze_status(ZE_RESULT_ERROR_UNKNOWN, "zeCommandListAppendLaunchKernel").code(),
            absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace kad::level_zero
