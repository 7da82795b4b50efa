// Stage 2 of the launch pipeline (DESIGN §3.2): select_launch() and the bound
// it puts on the padded iteration space of a workgroup size still to be tuned.
#include "core/select_launch.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/partition.h"
#include "core/tune.h"
#include "gtest/gtest.h"
#include "tests/support/core_fixtures.h"

namespace kad {
namespace {

using testing::Choice;
using testing::CudaLimits;

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t k2p31 = int64_t{1} << 31;
constexpr int64_t k2p40 = int64_t{1} << 40;
constexpr int64_t k2p22 = int64_t{1} << 22;

// CUDA's limits, as KernelAbstractions hard-codes them.

::testing::AssertionResult MessageHas(const absl::Status& status, absl::string_view needle) {
  if (absl::StrContains(status.message(), needle)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "message \"" << status.message() << "\" lacks \"" << needle << "\"";
}

// blocks * workgroup per dimension, multiplied; false on overflow.
bool PaddedItems(const Partition& p, int64_t* total) {
  int64_t t = 1;
  for (int d = 0; d < p.ndrange.rank(); ++d) {
    int64_t padded;
    if (__builtin_mul_overflow(p.blocks[d], p.workgroup[d], &padded)) return false;
    if (__builtin_mul_overflow(t, padded, &t)) return false;
  }
  *total = t;
  return true;
}

// ---- The conformance cases (tuned workgroup) ------------------------------------------

TEST(SelectLaunch, JustBelow2To31IsNdGrid32Bit) {
  absl::StatusOr<LaunchChoice> c =
      select_launch("saxpy", Dims{k2p31 - 1024}, nullptr, CudaLimits());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(*c, Choice(1, false, 32)) << to_string(*c);
}

TEST(SelectLaunch, PaddingPast2To31Is64Bit) {
  absl::StatusOr<LaunchChoice> c =
      select_launch("saxpy", Dims{k2p31 - 1023}, nullptr, CudaLimits());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(*c, Choice(1, false, 64)) << to_string(*c);
}

TEST(SelectLaunch, MoreThan2To63ItemsIsAnError) {
  absl::StatusOr<LaunchChoice> c =
      select_launch("saxpy", Dims{k2p40, k2p40}, nullptr, CudaLimits());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(MessageHas(c.status(), "saxpy"));
  EXPECT_TRUE(MessageHas(c.status(), "(1099511627776, 1099511627776)"));
  EXPECT_TRUE(MessageHas(c.status(), "2^63-1"));
}

TEST(SelectLaunch, HugeButEmptyNdrangeIsLinear32Bit) {
  absl::StatusOr<LaunchChoice> c =
      select_launch("saxpy", Dims{k2p40, k2p40, 0}, nullptr, CudaLimits());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(*c, Choice(3, true, 32)) << to_string(*c);
}

TEST(SelectLaunch, Rank4With2To66ItemsIsAnError) {
  absl::StatusOr<LaunchChoice> c =
      select_launch("saxpy", Dims{k2p22, k2p22, k2p22, 1}, nullptr, CudaLimits());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(MessageHas(c.status(), "saxpy"));
  EXPECT_TRUE(MessageHas(c.status(), "(4194304, 4194304, 4194304, 1)"));
}

TEST(SelectLaunch, Rank4IsLinear) {
  absl::StatusOr<LaunchChoice> c = select_launch("saxpy", Dims{2, 3, 4, 5}, nullptr, CudaLimits());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(*c, Choice(4, true, 32)) << to_string(*c);

  const Dims wgs{2, 3, 4, 1};
  absl::StatusOr<LaunchChoice> g = select_launch("saxpy", Dims{2, 3, 4, 5}, &wgs, CudaLimits());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(*g, Choice(4, true, 32)) << to_string(*g);
}

TEST(SelectLaunch, RankZeroIsNdGrid32Bit) {
  absl::StatusOr<LaunchChoice> c = select_launch("saxpy", Dims{}, nullptr, CudaLimits());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(*c, Choice(0, false, 32));
  const Dims wgs;
  absl::StatusOr<LaunchChoice> g = select_launch("saxpy", Dims{}, &wgs, CudaLimits());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(*g, Choice(0, false, 32));
}

TEST(SelectLaunch, EmptyNdrangesAre32Bit) {
  for (const Dims& e : {Dims{0}, Dims{5, 0}, Dims{2, 0, 2, 2}}) {
    absl::StatusOr<LaunchChoice> c = select_launch("saxpy", e, nullptr, CudaLimits());
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->index_bits, 32) << to_string(e);
    EXPECT_EQ(c->linear, e.rank > 3) << to_string(e);
  }
}

TEST(SelectLaunch, TunedExtentAboveMaxGroupsIsLinear) {
  // 65536 items in dimension 1 could need 65536 groups of 1 there.
  absl::StatusOr<LaunchChoice> c = select_launch("saxpy", Dims{1, 65536}, nullptr, CudaLimits());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(*c, Choice(2, true, 32)) << to_string(*c);

  absl::StatusOr<LaunchChoice> d = select_launch("saxpy", Dims{1, 65535}, nullptr, CudaLimits());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(*d, Choice(2, false, 32)) << to_string(*d);
}

// ---- Given workgroup sizes ---------------------------------------------------------

TEST(SelectLaunch, GivenWorkgroupWithinLimitsIsNdGrid) {
  const Dims wgs{32, 8, 4};
  absl::StatusOr<LaunchChoice> c = select_launch("saxpy", Dims{1000, 100, 10}, &wgs, CudaLimits());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(*c, Choice(3, false, 32)) << to_string(*c);
}

TEST(SelectLaunch, GivenWorkgroupOverPerDimensionLimitIsLinear) {
  const Dims wgs{1, 1, 128};  // 128 items in total, but dimension 2 allows only 64
  absl::StatusOr<LaunchChoice> c = select_launch("saxpy", Dims{8, 8, 128}, &wgs, CudaLimits());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(*c, Choice(3, true, 32)) << to_string(*c);

  const Dims ok{1, 1, 64};
  absl::StatusOr<LaunchChoice> d = select_launch("saxpy", Dims{8, 8, 128}, &ok, CudaLimits());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(*d, Choice(3, false, 32)) << to_string(*d);
}

TEST(SelectLaunch, GivenWorkgroupBlocksOverMaxGroupsAreLinear) {
  const Dims wgs{1, 1};
  absl::StatusOr<LaunchChoice> c = select_launch("saxpy", Dims{4, 65536}, &wgs, CudaLimits());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(*c, Choice(2, true, 32)) << to_string(*c);

  // The same extent in blocks of 2 fits.
  const Dims two{1, 2};
  absl::StatusOr<LaunchChoice> d = select_launch("saxpy", Dims{4, 65536}, &two, CudaLimits());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(*d, Choice(2, false, 32)) << to_string(*d);
}

TEST(SelectLaunch, GivenWorkgroupOverTotalLimitIsLinear) {
  const Dims wgs{64, 32};  // 2048 items: each dimension fits, the total does not
  absl::StatusOr<LaunchChoice> c = select_launch("saxpy", Dims{64, 64}, &wgs, CudaLimits());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(*c, Choice(2, true, 32)) << to_string(*c);
}

TEST(SelectLaunch, WorkgroupOfTwiceTheMaximumIsLinear) {
  // select_launch falls back to linear; validate_geometry then rejects the
  // workgroup (see launch_geometry_test.cc).
  const Dims wgs{2048};
  absl::StatusOr<LaunchChoice> c = select_launch("saxpy", Dims{4096}, &wgs, CudaLimits());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(*c, Choice(1, true, 32)) << to_string(*c);
}

TEST(SelectLaunch, GivenWorkgroupPaddingDecidesIndexBits) {
  const Dims w1024{1024};
  absl::StatusOr<LaunchChoice> a = select_launch("saxpy", Dims{k2p31 - 1024}, &w1024, CudaLimits());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(*a, Choice(1, false, 32));

  // 2^31-1 items in blocks of 2 pad to 2^31.
  const Dims w2{2};
  absl::StatusOr<LaunchChoice> b = select_launch("saxpy", Dims{kInt32Max}, &w2, CudaLimits());
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*b, Choice(1, false, 64));

  const Dims w1{1};
  absl::StatusOr<LaunchChoice> c = select_launch("saxpy", Dims{kInt32Max}, &w1, CudaLimits());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(*c, Choice(1, false, 32));
}

TEST(SelectLaunch, GivenWorkgroupShorterThanRankIsPaddedWithOnes) {
  const Dims wgs{16};
  absl::StatusOr<LaunchChoice> c = select_launch("saxpy", Dims{64, 100000}, &wgs, CudaLimits());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->linear);  // 100000 groups of 1 in dimension 1 exceed 65535
}

TEST(SelectLaunch, GivenWorkgroupHugeNdrangeIsAnError) {
  const Dims wgs{1024, 1};
  absl::StatusOr<LaunchChoice> c = select_launch("saxpy", Dims{k2p40, k2p40}, &wgs, CudaLimits());
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(MessageHas(c.status(), "2^63-1"));

  // Padding alone pushes it over: (2^62+1) in blocks of 2^62 pads to 2^63.
  const Dims big{int64_t{1} << 62};
  DeviceLimits unlimited = CudaLimits();
  unlimited.max_workgroup_size = kUnlimited;
  unlimited.max_workgroup_dims = {kUnlimited, kUnlimited, kUnlimited};
  absl::StatusOr<LaunchChoice> d =
      select_launch("saxpy", Dims{(int64_t{1} << 62) + 1}, &big, unlimited);
  EXPECT_FALSE(d.ok());
}

TEST(SelectLaunch, ToStringNamesTheChoice) {
  EXPECT_EQ(to_string(Choice(2, false, 32)), "N-d grid, 32-bit indices, rank 2");
  EXPECT_EQ(to_string(Choice(4, true, 64)), "linear, 64-bit indices, rank 4");
}

// ---- padded_bound ------------------------------------------------------------------

TEST(PaddedBound, FollowsTheCapacityRule) {
  // items: min(1000, 1024, 1024) = 1000 -> capacity 1; then 1 per dimension.
  EXPECT_EQ(padded_bound(Dims{1000, 7, 3}, CudaLimits(), false), (Dims{1999, 7, 3}));
  // items: 2 -> capacity 512; min(1000, 512, 1024) = 512 -> capacity 1.
  EXPECT_EQ(padded_bound(Dims{2, 1000, 9}, CudaLimits(), false), (Dims{3, 1511, 9}));
  // Dimension 2 is limited to 64 items.
  EXPECT_EQ(padded_bound(Dims{1, 1, 1000}, CudaLimits(), false), (Dims{1, 1, 1063}));
  EXPECT_EQ(padded_bound(Dims{k2p31 - 1024}, CudaLimits(), false), (Dims{kInt32Max}));
}

TEST(PaddedBound, EmptyExtentIsZero) {
  EXPECT_EQ(padded_bound(Dims{5, 0}, CudaLimits(), false), (Dims{9, 0}));
  EXPECT_EQ(padded_bound(Dims{0}, CudaLimits(), false), (Dims{0}));
  EXPECT_EQ(padded_bound(Dims{}, CudaLimits(), false).rank, 0);
}

TEST(PaddedBound, SaturatesAtInt64MaxAndSaysSo) {
  const int64_t max = std::numeric_limits<int64_t>::max();
  bool overflowed = false;
  EXPECT_EQ(padded_bound(Dims{max}, CudaLimits(), false, &overflowed), (Dims{max}));
  EXPECT_TRUE(overflowed);
  overflowed = false;
  padded_bound(Dims{max - 1023}, CudaLimits(), false, &overflowed);
  EXPECT_FALSE(overflowed);
}

// DESIGN §3 step 2: a tuned launch whose padded space could exceed 2^63-1 is
// refused at select, not carried on with a saturated bound.
TEST(SelectLaunch, TunedLaunchWhosePaddedSpaceCouldExceed2To63IsRefusedAtSelect) {
  const int64_t max = std::numeric_limits<int64_t>::max();
  absl::StatusOr<LaunchChoice> c = select_launch("saxpy", Dims{max - 1}, nullptr, CudaLimits());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(MessageHas(c.status(),
                         "kernel `saxpy`: iteration space (9223372036854775806) has "
                         "more than 2^63-1 work-items"));
  // The largest extent whose padding fits is accepted, as 64-bit.
  absl::StatusOr<LaunchChoice> d = select_launch("saxpy", Dims{max - 1023}, nullptr, CudaLimits());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->index_bits, 64);
}

// ---- Linear launches tuned across dimensions with different limits ----------------------

// A linear launch puts every item in hardware dimension 0, so tuning may give
// dimension 2 up to max_workgroup_dims[0] items (1024), not 64. The padded
// bound must still hold, or a 32-bit choice overflows.
TEST(SelectLaunch, TunedLinearRank3BoundCoversTunedWorkgroup) {
  const DeviceLimits limits = CudaLimits();
  const Dims extents{1, 1, k2p31 - 1023};  // dimension 2 above 65535 groups: linear
  absl::StatusOr<LaunchChoice> choice = select_launch("saxpy", extents, nullptr, limits);
  ASSERT_TRUE(choice.ok()) << choice.status();
  ASSERT_TRUE(choice->linear);
  const Dims tuned = threads_to_workgroup(1024, extents, *choice, limits);
  absl::StatusOr<Partition> p = partition_blocks("saxpy", NdRange(extents), tuned);
  ASSERT_TRUE(p.ok()) << p.status();
  int64_t items = 0;
  ASSERT_TRUE(PaddedItems(*p, &items));
  if (choice->index_bits == 32) {
    EXPECT_LE(items, kInt32Max) << "tuned workgroup " << to_string(tuned) << " pads "
                                << to_string(extents) << " to " << items
                                << " work-items under 32-bit indices";
  }
  int64_t bound = 0;
  ASSERT_TRUE(checked_product(padded_bound(extents, limits, choice->linear), &bound));
  EXPECT_LE(items, bound) << "tuned workgroup " << to_string(tuned);
}

// ---- Property: the tuned padding bound ----------------------------------------------------

class Rng {
 public:
  explicit Rng(uint64_t seed) : g_(seed) {}
  // Uniform in [lo, hi].
  int64_t uniform(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(g_);
  }
  // Log-uniform-ish in [1, 2^max_bits]: a random bit length, then a value of it.
  int64_t magnitude(int max_bits) {
    const int bits = static_cast<int>(uniform(0, max_bits));
    const int64_t lo = bits == 0 ? 1 : int64_t{1} << (bits - 1);
    const int64_t hi = bits == 0 ? 1 : (int64_t{1} << bits);
    return uniform(lo, hi);
  }
  bool chance(int percent) { return uniform(1, 100) <= percent; }

 private:
  std::mt19937_64 g_;
};

DeviceLimits RandomLimits(Rng& rng) {
  if (rng.chance(10)) return CudaLimits();
  DeviceLimits l;
  l.max_workgroup_size = static_cast<uint64_t>(rng.magnitude(11));
  for (size_t d = 0; d < 3; ++d) {
    // Usually within the total, sometimes above it, sometimes tiny.
    l.max_workgroup_dims[d] = static_cast<uint64_t>(
        rng.chance(70) ? rng.uniform(1, static_cast<int64_t>(l.max_workgroup_size))
                       : rng.magnitude(12));
    l.max_groups[d] = rng.chance(20) ? kUnlimited : static_cast<uint64_t>(rng.magnitude(31));
  }
  return l;
}

Dims RandomExtents(Rng& rng) {
  const int rank = static_cast<int>(rng.uniform(1, 4));
  Dims e = Dims::filled(rank, 0);
  const int max_bits = static_cast<int>(rng.uniform(1, 40));
  for (int d = 0; d < rank; ++d) e[d] = rng.chance(5) ? 0 : rng.magnitude(max_bits);
  return e;
}

std::string Describe(const Dims& extents, const DeviceLimits& l, uint64_t threads) {
  return absl::StrCat("extents ", to_string(extents), ", threads ", threads,
                      ", max_workgroup_size ", l.max_workgroup_size, ", max_workgroup_dims (",
                      l.max_workgroup_dims[0], ", ", l.max_workgroup_dims[1], ", ",
                      l.max_workgroup_dims[2], "), max_groups (", l.max_groups[0], ", ",
                      l.max_groups[1], ", ", l.max_groups[2], ")");
}

TEST(SelectLaunchProperty, TunedPaddingNeverExceedsTheBound) {
  Rng rng(0x6b61642d73656c65);  // fixed seed: reproducible
  int checked = 0, failures = 0;
  std::string first_failure;
  for (int i = 0; i < 20000; ++i) {
    const DeviceLimits limits = RandomLimits(rng);
    const Dims extents = RandomExtents(rng);
    if (extents.any_zero()) continue;  // empty: never tuned nor launched
    absl::StatusOr<LaunchChoice> choice = select_launch("k", extents, nullptr, limits);
    if (!choice.ok()) {  // only a bound past 2^63-1 is an error
      ASSERT_TRUE(absl::StrContains(choice.status().message(), "more than 2^63-1 work-items"))
          << Describe(extents, limits, 0) << ": " << choice.status();
      continue;
    }
    int64_t bound = 0;
    ASSERT_TRUE(checked_product(padded_bound(extents, limits, choice->linear), &bound))
        << Describe(extents, limits, 0);

    std::vector<uint64_t> threads = {1, limits.max_workgroup_size};
    for (int t = 0; t < 3; ++t)
      threads.push_back(
          static_cast<uint64_t>(rng.uniform(1, static_cast<int64_t>(limits.max_workgroup_size))));
    for (uint64_t th : threads) {
      const Dims tuned = threads_to_workgroup(th, extents, *choice, limits);
      absl::StatusOr<Partition> p = partition_blocks("k", NdRange(extents), tuned);
      ASSERT_TRUE(p.ok()) << Describe(extents, limits, th) << ": " << p.status();
      int64_t items = 0;
      const bool fits = PaddedItems(*p, &items);
      ++checked;
      if (!fits || items > bound) {
        if (failures++ == 0) {
          first_failure = absl::StrCat(Describe(extents, limits, th), ": ", to_string(*choice),
                                       ", tuned ", to_string(tuned), " pads to ",
                                       fits ? absl::StrCat(items) : "overflow", " > bound ", bound);
        }
      }
    }
  }
  EXPECT_GT(checked, 50000);
  EXPECT_EQ(failures, 0) << "first failure: " << first_failure;
}

TEST(SelectLaunchProperty, ChoiceDoesNotDependOnTheTunedSizeAndFitsIt) {
  Rng rng(0x74756e6564);
  int failures = 0;
  std::string first_failure;
  for (int i = 0; i < 20000; ++i) {
    const DeviceLimits limits = RandomLimits(rng);
    const Dims extents = RandomExtents(rng);
    if (extents.any_zero()) continue;  // empty: never tuned nor launched
    // The choice comes from the preliminary partition, before tuning; the same
    // extents with a static ndrange give the same choice.
    KernelSignature k;
    k.entry = "k";
    const NdRange range(extents);
    absl::StatusOr<Partition> prelim = partition(k, &range, nullptr);
    ASSERT_TRUE(prelim.ok()) << prelim.status();
    ASSERT_TRUE(prelim->tune_workgroup);
    absl::StatusOr<LaunchChoice> choice = select_launch("k", extents, nullptr, limits);
    if (!choice.ok()) continue;  // past 2^63-1 work-items: see the test above
    k.static_ndrange = range;
    absl::StatusOr<Partition> stat = partition(k, nullptr, nullptr);
    ASSERT_TRUE(stat.ok()) << stat.status();
    absl::StatusOr<LaunchChoice> again = select_launch("k", stat->ndrange.extents, nullptr, limits);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*again, *choice);

    for (uint64_t th :
         {uint64_t{1}, limits.max_workgroup_size,
          static_cast<uint64_t>(rng.uniform(1, static_cast<int64_t>(limits.max_workgroup_size)))}) {
      const Dims tuned = threads_to_workgroup(th, extents, *choice, limits);
      absl::StatusOr<Partition> p = partition_blocks("k", range, tuned);
      ASSERT_TRUE(p.ok()) << p.status();
      int64_t items = 0;
      bool ok = PaddedItems(*p, &items);
      // 32-bit indices hold the tuned padded space.
      if (ok && choice->index_bits == 32 && !p->empty()) ok = items <= kInt32Max;
      // An N-d grid fits the device with the tuned workgroup.
      if (ok && !choice->linear) {
        int64_t total = 1;
        for (int d = 0; d < extents.rank; ++d) {
          ok = ok && static_cast<uint64_t>(p->workgroup[d]) <= limits.max_workgroup_dims[d] &&
               static_cast<uint64_t>(p->blocks[d]) <= limits.max_groups[d];
          total *= p->workgroup[d];
        }
        ok = ok && static_cast<uint64_t>(total) <= limits.max_workgroup_size;
      }
      if (!ok && failures++ == 0) {
        first_failure =
            absl::StrCat(Describe(extents, limits, th), ": ", to_string(*choice), ", tuned ",
                         to_string(tuned), ", blocks ", to_string(p->blocks));
      }
    }
  }
  EXPECT_EQ(failures, 0) << "first failure: " << first_failure;
}

}  // namespace
}  // namespace kad
