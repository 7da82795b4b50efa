// The checks every backend makes through core/backend.h instead of its own
// copy: allocation sizes, issued events, and which event of a ring to wait for.
#include "core/backend.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kad {
namespace {

using ::testing::HasSubstr;

TEST(BackendChecks, AllocationMustBeNonEmptyAndWithinTheLargestAllocation) {
  DeviceInfo device;
  device.id = "test:0";
  device.limits.max_allocation_bytes = 1024;
  EXPECT_TRUE(check_allocation(device, 1).ok());
  EXPECT_TRUE(check_allocation(device, 1024).ok());
  EXPECT_EQ(check_allocation(device, 0).code(), absl::StatusCode::kInvalidArgument);
  const absl::Status big = check_allocation(device, 1025);
  EXPECT_EQ(big.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(
      big.message(),
      HasSubstr("a buffer of 1025 bytes exceeds device test:0's largest allocation of 1024"));
}

TEST(BackendChecks, WaitingForAnEventNeverIssuedNamesTheLastOne) {
  EXPECT_TRUE(check_issued(4, 5).ok());
  const absl::Status future = check_issued(5, 5);
  EXPECT_EQ(future.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(future.message(),
              HasSubstr("event 5 was never issued on this queue (the last is 4)"));
}

// A ring of 4 events after 10 launches (ids 1..10, next 11) holds 7..10.
TEST(BackendChecks, ARecycledEventIsWaitedForThroughTheOldestStillHeld) {
  EXPECT_EQ(oldest_held_event(10, 11, 4), 10u);
  EXPECT_EQ(oldest_held_event(7, 11, 4), 7u);
  EXPECT_EQ(oldest_held_event(6, 11, 4), 7u);
  EXPECT_EQ(oldest_held_event(1, 11, 4), 7u);
  EXPECT_EQ(oldest_held_event(2, 4, 4), 2u);  // nothing recycled yet
}

}  // namespace
}  // namespace kad
