// Stage 4 of the launch pipeline (DESIGN §3.4): threads_to_workgroup().
#include "core/tune.h"

#include <cstdint>

#include "gtest/gtest.h"
#include "tests/support/core_fixtures.h"

namespace kad {
namespace {

using testing::CudaLimits;

LaunchChoice NdGrid(int rank) {
  LaunchChoice c;
  c.rank = static_cast<uint8_t>(rank);
  return c;
}

LaunchChoice Linear(int rank) {
  LaunchChoice c;
  c.rank = static_cast<uint8_t>(rank);
  c.linear = true;
  return c;
}

TEST(ThreadsToWorkgroup, FillsDimensionZeroFirst) {
  EXPECT_EQ(threads_to_workgroup(256, Dims{1000, 1000}, NdGrid(2), CudaLimits()), (Dims{256, 1}));
  EXPECT_EQ(threads_to_workgroup(1024, Dims{4096, 4096, 4096}, NdGrid(3), CudaLimits()),
            (Dims{1024, 1, 1}));
}

TEST(ThreadsToWorkgroup, SpillsIntoLaterDimensionsWhenAnExtentIsSmall) {
  // 256 threads over (5, 7, 100): 5, then 256/5 = 51 -> 7, then 256/35 = 7.
  EXPECT_EQ(threads_to_workgroup(256, Dims{5, 7, 100}, NdGrid(3), CudaLimits()), (Dims{5, 7, 7}));
  EXPECT_EQ(threads_to_workgroup(1024, Dims{33, 3}, NdGrid(2), CudaLimits()), (Dims{33, 3}));
  EXPECT_EQ(threads_to_workgroup(64, Dims{16, 16}, NdGrid(2), CudaLimits()), (Dims{16, 4}));
}

TEST(ThreadsToWorkgroup, RespectsExtents) {
  EXPECT_EQ(threads_to_workgroup(1024, Dims{7}, NdGrid(1), CudaLimits()), (Dims{7}));
  EXPECT_EQ(threads_to_workgroup(1024, Dims{3, 5, 7}, NdGrid(3), CudaLimits()), (Dims{3, 5, 7}));
}

TEST(ThreadsToWorkgroup, RespectsPerDimensionLimits) {
  // Dimension 2 allows 64 items on an N-d grid.
  EXPECT_EQ(threads_to_workgroup(1024, Dims{1, 1, 1000}, NdGrid(3), CudaLimits()),
            (Dims{1, 1, 64}));
  DeviceLimits l = CudaLimits();
  l.max_workgroup_dims = {16, 8, 4};
  EXPECT_EQ(threads_to_workgroup(1024, Dims{100, 100, 100}, NdGrid(3), l), (Dims{16, 8, 4}));
}

TEST(ThreadsToWorkgroup, NeverReturnsZero) {
  // Zero threads, empty extents, a zero limit: every entry is still at least 1.
  EXPECT_EQ(threads_to_workgroup(0, Dims{100, 100}, NdGrid(2), CudaLimits()), (Dims{1, 1}));
  EXPECT_EQ(threads_to_workgroup(256, Dims{0, 5}, NdGrid(2), CudaLimits()), (Dims{1, 5}));
  EXPECT_EQ(threads_to_workgroup(256, Dims{2, 0, 2, 2}, Linear(4), CudaLimits()),
            (Dims{2, 1, 2, 2}));
  DeviceLimits zero = CudaLimits();
  zero.max_workgroup_dims = {0, 0, 0};
  EXPECT_EQ(threads_to_workgroup(256, Dims{100, 100}, NdGrid(2), zero), (Dims{1, 1}));
  // One thread: all ones.
  EXPECT_EQ(threads_to_workgroup(1, Dims{100, 100, 100}, NdGrid(3), CudaLimits()), (Dims{1, 1, 1}));
}

TEST(ThreadsToWorkgroup, ProductNeverExceedsThreads) {
  for (uint64_t threads : {1u, 2u, 3u, 7u, 64u, 100u, 1000u, 1024u}) {
    for (const Dims& e :
         {Dims{5, 7}, Dims{1000}, Dims{3, 5, 7}, Dims{2, 3, 4, 5}, Dims{1, 1, 1000}, Dims{33, 3}}) {
      const LaunchChoice c = e.rank > 3 ? Linear(e.rank) : NdGrid(e.rank);
      const Dims w = threads_to_workgroup(threads, e, c, CudaLimits());
      ASSERT_EQ(w.rank, e.rank);
      int64_t total = 1;
      for (int d = 0; d < w.rank; ++d) {
        EXPECT_GE(w[d], 1);
        EXPECT_LE(w[d], e[d]);
        total *= w[d];
      }
      EXPECT_LE(static_cast<uint64_t>(total), threads) << to_string(e) << " " << threads;
    }
  }
}

TEST(ThreadsToWorkgroup, LinearLaunchesUseTheLimitOfDimensionZero) {
  // A linear launch puts every item in hardware dimension 0, so dimension 2
  // of the ndrange may have more than the N-d grid's 64 items.
  EXPECT_EQ(threads_to_workgroup(1024, Dims{1, 1, 1000}, Linear(3), CudaLimits()),
            (Dims{1, 1, 1000}));
  EXPECT_EQ(threads_to_workgroup(1024, Dims{1, 1, 1, 4096}, Linear(4), CudaLimits()),
            (Dims{1, 1, 1, 1024}));
  DeviceLimits l = CudaLimits();
  l.max_workgroup_dims = {16, 1024, 1024};
  EXPECT_EQ(threads_to_workgroup(1024, Dims{100, 100}, Linear(2), l), (Dims{16, 16}));
  EXPECT_EQ(threads_to_workgroup(1024, Dims{100, 100}, NdGrid(2), l), (Dims{16, 64}));
}

TEST(ThreadsToWorkgroup, DimensionsAboveThreeUseTheLimitOfDimensionZero) {
  DeviceLimits l = CudaLimits();
  l.max_workgroup_dims = {4, 1024, 1024};
  EXPECT_EQ(threads_to_workgroup(1024, Dims{1, 1, 1, 100}, Linear(4), l), (Dims{1, 1, 1, 4}));
}

TEST(ThreadsToWorkgroup, RankZero) {
  const Dims w = threads_to_workgroup(256, Dims{}, NdGrid(0), CudaLimits());
  EXPECT_EQ(w.rank, 0);
  EXPECT_EQ(w, Dims{});
}

}  // namespace
}  // namespace kad
