// Stage 5 of the launch pipeline (DESIGN §3.5): launch_geometry() and
// validate_geometry().
#include "core/launch_geometry.h"

#include <array>
#include <cstdint>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "core/partition.h"
#include "core/select_launch.h"
#include "core/tune.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/core_fixtures.h"

namespace kad {
namespace {

using testing::CudaLimits;

using U3 = std::array<uint64_t, 3>;

KernelLimits KLimits(uint64_t max_workgroup_size) {
  KernelLimits k;
  k.max_workgroup_size = max_workgroup_size;
  return k;
}

LaunchChoice Choice(int rank, bool linear) {
  LaunchChoice c;
  c.rank = static_cast<uint8_t>(rank);
  c.linear = linear;
  return c;
}

Partition Part(const Dims& extents, const Dims& workgroup) {
  absl::StatusOr<Partition> p = partition_blocks("k", NdRange(extents), workgroup);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : Partition{};
}

LaunchGeometry Geometry(U3 groups, U3 items) {
  LaunchGeometry g;
  g.groups = groups;
  g.items = items;
  return g;
}

::testing::AssertionResult MessageHas(const absl::Status& status, absl::string_view needle) {
  if (absl::StrContains(status.message(), needle)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "message \"" << status.message() << "\" lacks \"" << needle << "\"";
}

// ---- launch_geometry ----------------------------------------------------------------

TEST(LaunchGeometry, NdGridPadsToThreeDimensions) {
  const LaunchGeometry one = launch_geometry(Part(Dims{37}, Dims{4}), Choice(1, false));
  EXPECT_EQ(one.groups, (U3{10, 1, 1}));
  EXPECT_EQ(one.items, (U3{4, 1, 1}));

  const LaunchGeometry two = launch_geometry(Part(Dims{33, 3}, Dims{2, 3}), Choice(2, false));
  EXPECT_EQ(two.groups, (U3{17, 1, 1}));
  EXPECT_EQ(two.items, (U3{2, 3, 1}));

  const LaunchGeometry three =
      launch_geometry(Part(Dims{3, 5, 7}, Dims{4, 1, 2}), Choice(3, false));
  EXPECT_EQ(three.groups, (U3{1, 5, 4}));
  EXPECT_EQ(three.items, (U3{4, 1, 2}));
}

TEST(LaunchGeometry, RankZeroIsOneItem) {
  const LaunchGeometry g = launch_geometry(Part(Dims{}, Dims{}), Choice(0, false));
  EXPECT_EQ(g.groups, (U3{1, 1, 1}));
  EXPECT_EQ(g.items, (U3{1, 1, 1}));
}

TEST(LaunchGeometry, LinearUsesProductOneOne) {
  const LaunchGeometry g = launch_geometry(Part(Dims{2, 3, 4, 5}, Dims{2, 3, 4}), Choice(4, true));
  EXPECT_EQ(g.groups, (U3{5, 1, 1}));  // 1 * 1 * 1 * 5
  EXPECT_EQ(g.items, (U3{24, 1, 1}));  // 2 * 3 * 4 * 1

  const LaunchGeometry h = launch_geometry(Part(Dims{33, 7}, Dims{4, 2}), Choice(2, true));
  EXPECT_EQ(h.groups, (U3{9 * 4, 1, 1}));
  EXPECT_EQ(h.items, (U3{8, 1, 1}));
}

TEST(LaunchGeometry, EmptyPartitionHasZeroGroups) {
  const LaunchGeometry nd = launch_geometry(Part(Dims{5, 0}, Dims{2, 2}), Choice(2, false));
  EXPECT_EQ(nd.groups, (U3{3, 0, 1}));
  const LaunchGeometry lin = launch_geometry(Part(Dims{2, 0, 2, 2}, Dims{}), Choice(4, true));
  EXPECT_EQ(lin.groups, (U3{0, 1, 1}));
}

// ---- validate_geometry: ok ----------------------------------------------------------

TEST(ValidateGeometry, AcceptsGeometryWithinLimits) {
  EXPECT_TRUE(
      validate_geometry("k", Geometry({10, 1, 1}, {1024, 1, 1}), KLimits(1024), CudaLimits()).ok());
  EXPECT_TRUE(validate_geometry("k", Geometry({2147483647, 65535, 65535}, {16, 8, 8}),
                                KLimits(1024), CudaLimits())
                  .ok());
  EXPECT_TRUE(
      validate_geometry("k", Geometry({1, 1, 1}, {1, 1, 64}), KLimits(64), CudaLimits()).ok());
  EXPECT_TRUE(validate_geometry("k", LaunchGeometry{}, KLimits(1), CudaLimits()).ok());
}

// ---- validate_geometry: errors ----------------------------------------------------------

TEST(ValidateGeometry, ItemsOverPerDimensionLimitIsAnError) {
  const absl::Status s =
      validate_geometry("saxpy", Geometry({1, 1, 1}, {1, 1, 128}), KLimits(1024), CudaLimits());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(MessageHas(s, "saxpy"));
  EXPECT_TRUE(MessageHas(s, "(1, 1, 128)"));
  EXPECT_TRUE(MessageHas(s, "64"));
  EXPECT_TRUE(MessageHas(s, "dimension 2"));
}

TEST(ValidateGeometry, WorkgroupOfTwiceTheMaximumIsAnError) {
  // The whole pipeline: a given workgroup of 2048 on a CUDA-like device.
  const Dims wgs{2048};
  const Partition p = Part(Dims{4096}, wgs);
  absl::StatusOr<LaunchChoice> choice = select_launch("saxpy", Dims{4096}, &wgs, CudaLimits());
  ASSERT_TRUE(choice.ok()) << choice.status();
  const LaunchGeometry g = launch_geometry(p, *choice);
  const absl::Status s = validate_geometry("saxpy", g, KLimits(1024), CudaLimits());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(MessageHas(s, "saxpy"));
  EXPECT_TRUE(MessageHas(s, "2048"));
  EXPECT_TRUE(MessageHas(s, "1024"));
}

TEST(ValidateGeometry, TotalItemsOverKernelMaximumIsAnError) {
  // (32, 32, 2): each dimension fits the device, 2048 in total does not.
  const absl::Status s =
      validate_geometry("saxpy", Geometry({1, 1, 1}, {32, 32, 2}), KLimits(1024), CudaLimits());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(MessageHas(s, "saxpy"));
  EXPECT_TRUE(MessageHas(s, "(32, 32, 2)"));
  EXPECT_TRUE(MessageHas(s, "2048"));
  EXPECT_TRUE(MessageHas(s, "1024"));
  EXPECT_TRUE(MessageHas(s, "maximum for this kernel"));
}

TEST(ValidateGeometry, KernelLimitTighterThanDeviceLimitIsUsed) {
  const absl::Status s =
      validate_geometry("saxpy", Geometry({4, 1, 1}, {512, 1, 1}), KLimits(256), CudaLimits());
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(MessageHas(s, "512"));
  EXPECT_TRUE(MessageHas(s, "256"));
  EXPECT_TRUE(
      validate_geometry("saxpy", Geometry({4, 1, 1}, {256, 1, 1}), KLimits(256), CudaLimits())
          .ok());
}

TEST(ValidateGeometry, DeviceLimitTighterThanKernelLimitIsUsed) {
  const absl::Status s =
      validate_geometry("saxpy", Geometry({1, 1, 1}, {32, 32, 2}), KLimits(4096), CudaLimits());
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(MessageHas(s, "1024"));
}

TEST(ValidateGeometry, GroupsOverDeviceMaximumIsAnError) {
  const absl::Status s =
      validate_geometry("saxpy", Geometry({1, 65536, 1}, {32, 1, 1}), KLimits(1024), CudaLimits());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(MessageHas(s, "saxpy"));
  EXPECT_TRUE(MessageHas(s, "65536"));
  EXPECT_TRUE(MessageHas(s, "65535"));
  EXPECT_TRUE(MessageHas(s, "dimension 1"));

  const absl::Status t = validate_geometry("saxpy", Geometry({2147483648u, 1, 1}, {1, 1, 1}),
                                           KLimits(1024), CudaLimits());
  ASSERT_FALSE(t.ok());
  EXPECT_TRUE(MessageHas(t, "2147483648"));
  EXPECT_TRUE(MessageHas(t, "2147483647"));
}

TEST(ValidateGeometry, GlobalSizeOver2To63IsAnError) {
  DeviceLimits l = CudaLimits();
  l.max_groups = {kUnlimited, kUnlimited, kUnlimited};
  const uint64_t g = uint64_t{1} << 54;  // 2^54 * 2^9 = 2^63
  const absl::Status s =
      validate_geometry("saxpy", Geometry({g, 1, 1}, {512, 1, 1}), KLimits(1024), l);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(MessageHas(s, "saxpy"));
  EXPECT_TRUE(MessageHas(s, "18014398509481984"));
  EXPECT_TRUE(MessageHas(s, "512"));
  EXPECT_TRUE(MessageHas(s, "2^63-1"));

  // One item less per group fits.
  EXPECT_TRUE(validate_geometry("saxpy", Geometry({g, 1, 1}, {511, 1, 1}), KLimits(1024), l).ok());

  // groups * items wrapping around 2^64 is caught too.
  const absl::Status w =
      validate_geometry("saxpy", Geometry({uint64_t{1} << 60, 1, 1}, {32, 1, 1}), KLimits(1024), l);
  EXPECT_FALSE(w.ok());
}

// Per-dimension limits reported as unlimited must not let the total wrap.
TEST(ValidateGeometry, TotalItemsOverflowIsAnError) {
  DeviceLimits l = CudaLimits();
  l.max_workgroup_dims = {kUnlimited, kUnlimited, kUnlimited};
  const uint64_t x = uint64_t{1} << 32;  // (2^32, 2^32, 1): 2^64 items, wraps to 0
  const absl::Status s =
      validate_geometry("saxpy", Geometry({1, 1, 1}, {x, x, 1}), KLimits(1024), l);
  EXPECT_FALSE(s.ok()) << "a workgroup of (2^32, 2^32, 1) was accepted";
}

// ---- The pipeline, host side -------------------------------------------------------------

// A static ndrange larger than the device's workgroup: the preliminary
// workgroup (the whole ndrange) is never validated; the tuned one is.
TEST(LaunchPipeline, StaticNdrangeLargerThanMaximumWorkgroupTunesAndValidates) {
  KernelSignature k;
  k.entry = "saxpy";
  k.static_ndrange = NdRange(Dims{4096, 3});
  absl::StatusOr<Partition> prelim = partition(k, nullptr, nullptr);
  ASSERT_TRUE(prelim.ok()) << prelim.status();
  ASSERT_TRUE(prelim->tune_workgroup);
  EXPECT_EQ(prelim->workgroup, (Dims{4096, 3}));

  absl::StatusOr<LaunchChoice> choice =
      select_launch("saxpy", prelim->ndrange.extents, nullptr, CudaLimits());
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_FALSE(choice->linear);

  // Validating the preliminary workgroup would fail: it is not the one launched.
  EXPECT_FALSE(
      validate_geometry("saxpy", launch_geometry(*prelim, *choice), KLimits(1024), CudaLimits())
          .ok());

  const Dims tuned = threads_to_workgroup(1024, prelim->ndrange.extents, *choice, CudaLimits());
  EXPECT_EQ(tuned, (Dims{1024, 1}));
  absl::StatusOr<Partition> part = partition_blocks("saxpy", prelim->ndrange, tuned);
  ASSERT_TRUE(part.ok()) << part.status();
  const LaunchGeometry g = launch_geometry(*part, *choice);
  EXPECT_EQ(g.groups, (U3{4, 3, 1}));
  EXPECT_EQ(g.items, (U3{1024, 1, 1}));
  EXPECT_TRUE(validate_geometry("saxpy", g, KLimits(1024), CudaLimits()).ok());
}

TEST(LaunchPipeline, TunedRank4LinearLaunchValidates) {
  const Dims extents{2, 3, 4, 5};
  absl::StatusOr<LaunchChoice> choice = select_launch("k", extents, nullptr, CudaLimits());
  ASSERT_TRUE(choice.ok()) << choice.status();
  ASSERT_TRUE(choice->linear);
  const Dims tuned = threads_to_workgroup(1024, extents, *choice, CudaLimits());
  EXPECT_EQ(tuned, extents);
  const LaunchGeometry g = launch_geometry(Part(extents, tuned), *choice);
  EXPECT_EQ(g.groups, (U3{1, 1, 1}));
  EXPECT_EQ(g.items, (U3{120, 1, 1}));
  EXPECT_TRUE(validate_geometry("k", g, KLimits(1024), CudaLimits()).ok());
}

// ---- groups in one launch (PoCL counts them in 32 bits) ---------------------------------

TEST(ValidateGeometry, GroupsInOneLaunchOverTheDevicesTotalAreAnError) {
  DeviceLimits l = CudaLimits();
  l.max_groups = {kUnlimited, kUnlimited, kUnlimited};
  l.max_total_groups = 0xFFFFFFFFu;
  EXPECT_TRUE(
      validate_geometry("k", Geometry({65535, 65537, 1}, {1, 1, 1}), KLimits(1024), l).ok());
  const absl::Status s =
      validate_geometry("k", Geometry({65536, 65536, 1}, {1, 1, 1}), KLimits(1024), l);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "kernel `k`: 65536 x 65536 x 1 = 4294967296 groups exceed the device's maximum of "
            "4294967295 groups in one launch");
  // A product that wraps 2^64 is over any maximum too.
  EXPECT_FALSE(validate_geometry("k",
                                 Geometry({uint64_t{1} << 32, uint64_t{1} << 32, 1}, {1, 1, 1}),
                                 KLimits(1024), l)
                   .ok());
}

// ---- validate_workgroup: the size as the client gave it ---------------------------------

TEST(ValidateWorkgroup, NamesTheSizeGivenNotThePaddedOne) {
  EXPECT_TRUE(validate_workgroup("k", Dims{32, 32}, CudaLimits()).ok());
  const absl::Status s = validate_workgroup("k", Dims{64, 64, 2}, CudaLimits());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "kernel `k`: workgroup size (64, 64, 2) has 8192 work-items, more than 1024, the "
            "device's maximum");
  const int64_t big = int64_t{1} << 40;
  EXPECT_THAT(std::string(validate_workgroup("k", Dims{big, big}, CudaLimits()).message()),
              ::testing::HasSubstr("has more than 2^63-1 work-items"));
}

}  // namespace
}  // namespace kad
