// The pure translations of level_zero_launch.h: parameter values, the 32-bit
// grid, the tuned group size and a compiled kernel's limits.
#include <cstring>
#include <limits>

#include "backends/level_zero/level_zero_launch.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kad::level_zero {
namespace {

using ::testing::HasSubstr;

TEST(LevelZeroArguments, ContextIsParameterZeroBy256BytesOfValue) {
  LaunchContext context{};
  const ArgumentValue v = context_argument(context);
  EXPECT_EQ(v.size, 256u);
  EXPECT_EQ(v.value, &context);
}

TEST(LevelZeroArguments, BufferIsItsEightByteDeviceAddressReadFromTheBuffer) {
  void* address = reinterpret_cast<void*>(uintptr_t{0xff00'1234'5678'9a00});
  KernelArg arg;
  arg.kind = ArgKind::kBuffer;
  ArgumentValue v = user_argument(arg, &address);
  EXPECT_EQ(v.size, 8u);
  EXPECT_EQ(v.value, &address);  // the driver copies the address from the buffer's field
  arg.kind = ArgKind::kConstBuffer;
  v = user_argument(arg, &address);
  EXPECT_EQ(v.size, 8u);
  EXPECT_EQ(v.value, &address);
}

TEST(LevelZeroArguments, ScalarIsPassedByValueInItsTypesSize) {
  const struct {
    KernelArg arg;
    size_t size;
  } cases[] = {
      {KernelArg::of_scalar<int8_t>(-3), 1},    {KernelArg::of_scalar<uint8_t>(200), 1},
      {KernelArg::of_scalar<int16_t>(-300), 2}, {KernelArg::of_scalar<uint16_t>(60000), 2},
      {KernelArg::of_half_bits(0x3c00), 2},     {KernelArg::of_scalar<int32_t>(-70000), 4},
      {KernelArg::of_scalar<uint32_t>(7u), 4},  {KernelArg::of_scalar<float>(2.5f), 4},
      {KernelArg::of_scalar<int64_t>(-1), 8},   {KernelArg::of_scalar<uint64_t>(1ull << 40), 8},
      {KernelArg::of_scalar<double>(0.125), 8},
  };
  for (const auto& c : cases) {
    const ArgumentValue v = user_argument(c.arg, nullptr);
    EXPECT_EQ(v.size, c.size) << scalar_type_name(c.arg.scalar);
    EXPECT_EQ(v.value, &c.arg.bits) << scalar_type_name(c.arg.scalar);
  }
  // The bytes the driver reads are the value's own (little end first).
  const KernelArg f = KernelArg::of_scalar<float>(2.5f);
  float back = 0;
  std::memcpy(&back, user_argument(f, nullptr).value, sizeof(float));
  EXPECT_EQ(back, 2.5f);
}

TEST(LevelZeroArguments, LocalMemoryIsASizeWithoutValue) {
  const ArgumentValue v = user_argument(KernelArg::of_local(4096), nullptr);
  EXPECT_EQ(v.size, 4096u);
  EXPECT_EQ(v.value, nullptr);
}

TEST(LevelZeroGrid, GroupsAndItemsPerDimensionBecomeGroupCountAndGroupSize) {
  LaunchGeometry g;
  g.groups = {10, 20, 30};
  g.items = {64, 2, 1};
  LaunchGrid grid;
  ASSERT_TRUE(launch_grid("k", g, &grid).ok());
  EXPECT_EQ(grid.groups.groupCountX, 10u);
  EXPECT_EQ(grid.groups.groupCountY, 20u);
  EXPECT_EQ(grid.groups.groupCountZ, 30u);
  EXPECT_EQ(grid.group_size[0], 64u);
  EXPECT_EQ(grid.group_size[1], 2u);
  EXPECT_EQ(grid.group_size[2], 1u);
}

TEST(LevelZeroGrid, LargestThirtyTwoBitGroupCountFits) {
  LaunchGeometry g;
  g.groups = {std::numeric_limits<uint32_t>::max(), 1, 1};
  LaunchGrid grid;
  ASSERT_TRUE(launch_grid("k", g, &grid).ok());
  EXPECT_EQ(grid.groups.groupCountX, std::numeric_limits<uint32_t>::max());
}

TEST(LevelZeroGrid, GroupCountBeyondThirtyTwoBitsIsAnErrorNamingKernelDimensionAndValue) {
  LaunchGeometry g;
  g.groups = {1, uint64_t{1} << 32, 1};
  LaunchGrid grid;
  const absl::Status s = launch_grid("saxpy", g, &grid);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "kernel `saxpy`: dimension 2 has 1 items per group and 4294967296 groups; Level Zero "
            "takes at most 4294967295 of each");
}

TEST(LevelZeroTuning, SuggestionIsAskedForTheItemsRoundedUpToTheSimdWidth) {
  EXPECT_EQ(suggestion_extent(37, 16), 48u);  // a prime would only divide by 1
  EXPECT_EQ(suggestion_extent(48, 16), 48u);
  EXPECT_EQ(suggestion_extent(1, 32), 32u);
  EXPECT_EQ(suggestion_extent(0, 16), 16u);  // never ask about an empty launch
  EXPECT_EQ(suggestion_extent(37, 0), 37u);  // no width known: as is
}

TEST(LevelZeroTuning, SuggestionExtentStaysWithinThirtyTwoBitsAndTheWidth) {
  EXPECT_EQ(suggestion_extent(uint64_t{1} << 40, 16), 0xfffffff0u);
  EXPECT_EQ(suggestion_extent(uint64_t{1} << 40, 1), 0xffffffffu);
  EXPECT_EQ(suggestion_extent(0xfffffff1u, 16), 0xfffffff0u);
}

TEST(LevelZeroTuning, DriversSuggestionIsUsedWithinTheCap) {
  EXPECT_EQ(tuned_group_size(256, 1 << 20, 16, 1024), 256u);
  EXPECT_EQ(tuned_group_size(1024, 1 << 20, 16, 512), 512u);  // kernel or launch maximum
  EXPECT_EQ(tuned_group_size(64, 1 << 20, 16, 0), 1u);        // a cap of 0 still runs
}

TEST(LevelZeroTuning, WithoutASuggestionTheRoundedItemCountIsUsedWithinTheCap) {
  EXPECT_EQ(tuned_group_size(0, 37, 16, 1024), 48u);
  EXPECT_EQ(tuned_group_size(0, 1 << 20, 16, 1024), 1024u);
}

ze_kernel_properties_t properties() {
  ze_kernel_properties_t p{};
  p.stype = ZE_STRUCTURE_TYPE_KERNEL_PROPERTIES;
  return p;
}

DeviceLimits device_limits() {
  DeviceLimits d;
  d.max_workgroup_size = 1024;
  return d;
}

TEST(LevelZeroKernelLimits, RequiredGroupSizeIsTheOnlySize) {
  ze_kernel_properties_t p = properties();
  p.requiredGroupSizeX = 8;
  p.requiredGroupSizeY = 4;
  p.requiredGroupSizeZ = 2;
  p.maxSubgroupSize = 16;
  p.maxNumSubgroups = 64;
  EXPECT_EQ(kernel_limits(p, device_limits()).max_workgroup_size, 64u);
}

TEST(LevelZeroKernelLimits, SubgroupsBoundTheDevicesMaximum) {
  ze_kernel_properties_t p = properties();
  p.maxSubgroupSize = 16;
  p.maxNumSubgroups = 32;  // 512 items: a kernel compiled with many registers
  p.localMemSize = 2048;
  const KernelLimits k = kernel_limits(p, device_limits());
  EXPECT_EQ(k.max_workgroup_size, 512u);
  EXPECT_EQ(k.preferred_multiple, 16u);
  EXPECT_EQ(k.local_memory_bytes, 2048u);
  p.maxNumSubgroups = 128;  // 2048 items: the device allows 1024
  EXPECT_EQ(kernel_limits(p, device_limits()).max_workgroup_size, 1024u);
}

TEST(LevelZeroKernelLimits, WithoutSubgroupInformationTheDeviceDecides) {
  const KernelLimits k = kernel_limits(properties(), device_limits());
  EXPECT_EQ(k.max_workgroup_size, 1024u);
  EXPECT_EQ(k.preferred_multiple, 1u);
  EXPECT_EQ(k.local_memory_bytes, 0u);
}

TEST(LevelZeroKernelLimits, RequiredSubgroupSizeIsThePreferredMultiple) {
  ze_kernel_properties_t p = properties();
  p.maxSubgroupSize = 32;
  p.requiredSubgroupSize = 8;
  EXPECT_EQ(kernel_limits(p, device_limits()).preferred_multiple, 8u);
}

}  // namespace
}  // namespace kad::level_zero
