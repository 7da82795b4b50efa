// Stage 1 of the launch pipeline (DESIGN §3.1): partition().
#include "core/partition.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/support/core_fixtures.h"

namespace kad {
namespace {

using testing::Kernel;

// Whether `status`'s message contains `needle`, printing the message if not.
::testing::AssertionResult MessageHas(const absl::Status& status, absl::string_view needle) {
  if (absl::StrContains(status.message(), needle)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "message \"" << status.message() << "\" lacks \"" << needle << "\"";
}

std::string Message(const absl::StatusOr<Partition>& p) {
  return std::string(p.status().message());
}

// ---- Workgroup normalisation -------------------------------------------------

TEST(Partition, WorkgroupIsPaddedWithOnesToTheNdrangeRank) {
  const NdRange range(Dims{8, 6, 4});
  const Dims wgs{4};
  absl::StatusOr<Partition> p = partition(Kernel(), &range, &wgs);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->workgroup, (Dims{4, 1, 1}));
  EXPECT_EQ(p->blocks, (Dims{2, 6, 4}));
  EXPECT_EQ(p->ndrange, range);
  EXPECT_FALSE(p->dynamic_check);
  EXPECT_FALSE(p->tune_workgroup);
  EXPECT_FALSE(p->static_blocks);
}

TEST(Partition, ZeroWorkgroupEntryBecomesOne) {
  const NdRange range(Dims{8, 6});
  const Dims wgs{0, 3};
  absl::StatusOr<Partition> p = partition(Kernel(), &range, &wgs);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->workgroup, (Dims{1, 3}));
  EXPECT_EQ(p->blocks, (Dims{8, 2}));
  EXPECT_FALSE(p->dynamic_check);
}

TEST(Partition, EmptyWorkgroupTupleIsAllOnes) {
  const NdRange range(Dims{5, 7});
  const Dims wgs;  // rank 0: given, but says nothing
  absl::StatusOr<Partition> p = partition(Kernel(), &range, &wgs);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->workgroup, (Dims{1, 1}));
  EXPECT_EQ(p->blocks, (Dims{5, 7}));
  EXPECT_FALSE(p->tune_workgroup);
}

// ---- Blocks and the bounds check ---------------------------------------------

TEST(Partition, BlocksAreTheCeilingOfExtentOverWorkgroup) {
  const NdRange range(Dims{37, 33, 7});
  const Dims wgs{4, 3, 7};
  absl::StatusOr<Partition> p = partition(Kernel(), &range, &wgs);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->blocks, (Dims{10, 11, 1}));
  EXPECT_TRUE(p->dynamic_check);  // 37 % 4 != 0
}

TEST(Partition, WorkgroupLargerThanExtentGivesOneBlock) {
  const NdRange range(Dims{7});
  const Dims wgs{256};
  absl::StatusOr<Partition> p = partition(Kernel(), &range, &wgs);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->blocks, (Dims{1}));
  EXPECT_EQ(p->workgroup, (Dims{256}));
  EXPECT_TRUE(p->dynamic_check);
}

TEST(Partition, DynamicCheckExactlyWhenSomeExtentIsNotAMultiple) {
  struct Case {
    Dims extents, wgs;
    bool check;
  };
  const Case cases[] = {
      {Dims{16}, Dims{4}, false},
      {Dims{17}, Dims{4}, true},
      {Dims{16, 9}, Dims{4, 3}, false},
      {Dims{16, 10}, Dims{4, 3}, true},
      {Dims{15, 9}, Dims{4, 3}, true},
      {Dims{2, 3, 4, 5}, Dims{2, 3, 4}, false},
      {Dims{2, 3, 4, 5}, Dims{2, 3, 4, 2}, true},
      {Dims{7}, Dims{1}, false},
      {Dims{5, 0}, Dims{2, 4}, true},   // 5 % 2 != 0 even though the range is empty
      {Dims{4, 0}, Dims{2, 4}, false},  // 0 is a multiple of everything
  };
  for (const Case& c : cases) {
    const NdRange range(c.extents);
    absl::StatusOr<Partition> p = partition(Kernel(), &range, &c.wgs);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->dynamic_check, c.check) << to_string(c.extents) << " / " << to_string(c.wgs);
  }
}

TEST(Partition, EmptyExtentHasZeroBlocks) {
  const NdRange range(Dims{5, 0});
  const Dims wgs{2, 4};
  absl::StatusOr<Partition> p = partition(Kernel(), &range, &wgs);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->blocks, (Dims{3, 0}));
  EXPECT_TRUE(p->empty());
}

TEST(Partition, EmptyNdrangesAreEmpty) {
  const Dims shapes[] = {Dims{0}, Dims{5, 0}, Dims{2, 0, 2, 2}};
  for (const Dims& shape : shapes) {
    const NdRange range(shape);
    // Given workgroup, tuned workgroup, and a static ndrange.
    const Dims wgs{2};
    for (const Dims* w : {&wgs, static_cast<const Dims*>(nullptr)}) {
      absl::StatusOr<Partition> p = partition(Kernel(), &range, w);
      ASSERT_TRUE(p.ok()) << to_string(shape) << ": " << p.status();
      EXPECT_TRUE(p->empty()) << to_string(shape);
      for (int d = 0; d < shape.rank; ++d) {
        EXPECT_GE(p->workgroup[d], 1) << to_string(shape);
        if (shape[d] == 0)
          EXPECT_EQ(p->blocks[d], 0) << to_string(shape);
        else
          EXPECT_GE(p->blocks[d], 1) << to_string(shape);
      }
    }
    absl::StatusOr<Partition> s = partition(Kernel(range), nullptr, nullptr);
    ASSERT_TRUE(s.ok()) << to_string(shape) << ": " << s.status();
    EXPECT_TRUE(s->empty());
  }
}

TEST(Partition, TunedEmptyNdrangeHasOneBlockPerNonEmptyDimension) {
  const NdRange range(Dims{2, 0, 2, 2});
  absl::StatusOr<Partition> p = partition(Kernel(), &range, nullptr);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->workgroup, (Dims{2, 1, 2, 2}));  // 0 became 1
  EXPECT_EQ(p->blocks, (Dims{1, 0, 1, 1}));
  EXPECT_TRUE(p->tune_workgroup);
  EXPECT_TRUE(p->empty());
}

TEST(Partition, RankZeroNdrangeIsOneItem) {
  const NdRange range{Dims{}};
  ASSERT_EQ(range.rank(), 0);
  const Dims wgs;
  absl::StatusOr<Partition> given = partition(Kernel(), &range, &wgs);
  ASSERT_TRUE(given.ok()) << given.status();
  EXPECT_EQ(given->workgroup.rank, 0);
  EXPECT_EQ(given->blocks.rank, 0);
  EXPECT_FALSE(given->dynamic_check);
  EXPECT_FALSE(given->empty());

  absl::StatusOr<Partition> tuned = partition(Kernel(), &range, nullptr);
  ASSERT_TRUE(tuned.ok()) << tuned.status();
  EXPECT_TRUE(tuned->tune_workgroup);
  EXPECT_FALSE(tuned->empty());

  absl::StatusOr<Partition> stat = partition(Kernel(range, Dims{}), nullptr, nullptr);
  ASSERT_TRUE(stat.ok()) << stat.status();
  EXPECT_TRUE(stat->static_blocks);
  EXPECT_FALSE(stat->dynamic_check);
}

TEST(Partition, RankZeroNdrangeRejectsANonEmptyWorkgroup) {
  const NdRange range{Dims{}};
  const Dims wgs{4};
  absl::StatusOr<Partition> p = partition(Kernel(), &range, &wgs);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
}

// ---- Static ndrange ---------------------------------------------------------

TEST(Partition, StaticNdrangeIsUsedWhenTheLaunchGivesNone) {
  const NdRange stat(Dims{16, 4});
  const Dims wgs{4, 4};
  absl::StatusOr<Partition> p = partition(Kernel(stat), nullptr, &wgs);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->ndrange, stat);
  EXPECT_EQ(p->blocks, (Dims{4, 1}));
  EXPECT_FALSE(p->static_blocks);  // the workgroup is dynamic
}

TEST(Partition, StaticNdrangeAcceptsAnEqualLaunchNdrange) {
  const NdRange stat(Dims{9, 5}, Dims{0, -2});
  const NdRange same(Dims{9, 5}, Dims{0, -2});
  const Dims wgs{3};
  absl::StatusOr<Partition> p = partition(Kernel(stat), &same, &wgs);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->ndrange, stat);
}

TEST(Partition, StaticNdrangeMismatchIsAnError) {
  const NdRange stat(Dims{16, 4});
  const NdRange launch(Dims{16, 5});
  const Dims wgs{4};
  absl::StatusOr<Partition> p = partition(Kernel(stat), &launch, &wgs);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(MessageHas(p.status(), "saxpy"));
  EXPECT_TRUE(MessageHas(p.status(), "(16, 4)"));
  EXPECT_TRUE(MessageHas(p.status(), "(16, 5)"));
}

TEST(Partition, StaticNdrangeRankMismatchIsAnError) {
  const NdRange stat(Dims{16, 4});
  const NdRange launch(Dims{64});
  absl::StatusOr<Partition> p = partition(Kernel(stat), &launch, nullptr);
  ASSERT_FALSE(p.ok());
  EXPECT_TRUE(MessageHas(p.status(), "(16, 4)"));
  EXPECT_TRUE(MessageHas(p.status(), "(64)"));
}

TEST(Partition, StaticNdrangeOffsetMismatchIsAnError) {
  const NdRange stat(Dims{9, 5}, Dims{0, -2});
  const NdRange no_offsets(Dims{9, 5});  // same extents, offsets (0, 0)
  absl::StatusOr<Partition> p = partition(Kernel(stat), &no_offsets, nullptr);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(MessageHas(p.status(), "saxpy"));
  EXPECT_TRUE(MessageHas(p.status(), "(0:8, -2:2)"));
  EXPECT_TRUE(MessageHas(p.status(), "(9, 5)"));

  const NdRange other_offsets(Dims{9, 5}, Dims{1, -2});
  absl::StatusOr<Partition> q = partition(Kernel(stat), &other_offsets, nullptr);
  ASSERT_FALSE(q.ok());
  EXPECT_TRUE(MessageHas(q.status(), "(0:8, -2:2)"));
  EXPECT_TRUE(MessageHas(q.status(), "(1:9, -2:2)"));
}

TEST(Partition, StaticNdrangeWithoutOffsetsRejectsALaunchWithOffsets) {
  const NdRange stat(Dims{9, 5});
  const NdRange shifted(Dims{9, 5}, Dims{0, -2});
  absl::StatusOr<Partition> p = partition(Kernel(stat), &shifted, nullptr);
  ASSERT_FALSE(p.ok());
  EXPECT_TRUE(MessageHas(p.status(), "(9, 5)"));
  EXPECT_TRUE(MessageHas(p.status(), "(0:8, -2:2)"));
}

TEST(Partition, OffsetsPartitionLikeExtents) {
  const NdRange stat(Dims{9, 5}, Dims{0, -2});
  const Dims wgs{4, 2};
  absl::StatusOr<Partition> p = partition(Kernel(stat), nullptr, &wgs);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->ndrange.extents, (Dims{9, 5}));
  EXPECT_EQ(p->ndrange.offsets, (Dims{0, -2}));
  EXPECT_EQ(p->workgroup, (Dims{4, 2}));
  EXPECT_EQ(p->blocks, (Dims{3, 3}));
  EXPECT_TRUE(p->dynamic_check);

  // The same extents at offset zero partition identically.
  const NdRange plain(Dims{9, 5});
  absl::StatusOr<Partition> q = partition(Kernel(), &plain, &wgs);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->blocks, p->blocks);
  EXPECT_EQ(q->workgroup, p->workgroup);
  EXPECT_EQ(q->dynamic_check, p->dynamic_check);
}

TEST(Partition, DynamicNdrangeWithOffsets) {
  const NdRange range(Dims{9, 5}, Dims{0, -2});
  absl::StatusOr<Partition> p = partition(Kernel(), &range, nullptr);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->ndrange, range);
  EXPECT_EQ(p->workgroup, (Dims{9, 5}));  // preliminary: the extents, not the offsets
  EXPECT_EQ(p->blocks, (Dims{1, 1}));
}

TEST(Partition, OffsetRankMismatchIsAnError) {
  const NdRange range(Dims{9, 5}, Dims{0});
  absl::StatusOr<Partition> p = partition(Kernel(), &range, nullptr);
  ASSERT_FALSE(p.ok());
  EXPECT_TRUE(MessageHas(p.status(), "saxpy"));
}

TEST(Partition, OffsetOverflowIsAnError) {
  const NdRange range(Dims{10}, Dims{INT64_MAX - 5});
  const Dims wgs{1};
  absl::StatusOr<Partition> p = partition(Kernel(), &range, &wgs);
  ASSERT_FALSE(p.ok());
  EXPECT_TRUE(MessageHas(p.status(), "saxpy"));
}

// ---- Missing sizes ------------------------------------------------------------

TEST(Partition, MissingDynamicNdrangeIsAnError) {
  const Dims wgs{4};
  absl::StatusOr<Partition> p = partition(Kernel(), nullptr, &wgs);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(p),
            "cannot partition kernel `saxpy`: its ndrange is dynamic and the launch gave none");

  // Also with a static workgroup size (KA's "Can not partition kernel!").
  absl::StatusOr<Partition> q = partition(Kernel(std::nullopt, Dims{4}), nullptr, nullptr);
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(Message(q),
            "cannot partition kernel `saxpy`: its ndrange is dynamic and the launch gave none");
}

// ---- Static workgroup ----------------------------------------------------------

TEST(Partition, StaticWorkgroupIsUsedWhenTheLaunchGivesNone) {
  const NdRange range(Dims{64, 3});
  absl::StatusOr<Partition> p = partition(Kernel(std::nullopt, Dims{16}), &range, nullptr);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->workgroup, (Dims{16, 1}));
  EXPECT_EQ(p->blocks, (Dims{4, 3}));
  EXPECT_FALSE(p->tune_workgroup);
  EXPECT_FALSE(p->static_blocks);  // the ndrange is dynamic
}

TEST(Partition, StaticWorkgroupAcceptsAnEqualLaunchWorkgroup) {
  const NdRange range(Dims{64});
  const Dims wgs{16};
  absl::StatusOr<Partition> p = partition(Kernel(std::nullopt, Dims{16}), &range, &wgs);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->workgroup, (Dims{16}));
}

TEST(Partition, StaticWorkgroupMismatchIsAnError) {
  const NdRange range(Dims{64, 8});
  const Dims wgs{32, 2};
  absl::StatusOr<Partition> p = partition(Kernel(std::nullopt, Dims{16, 4}), &range, &wgs);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(MessageHas(p.status(), "saxpy"));
  EXPECT_TRUE(MessageHas(p.status(), "(16, 4)"));
  EXPECT_TRUE(MessageHas(p.status(), "(32, 2)"));
}

// ---- Preliminary (to be tuned) workgroup -------------------------------------------

TEST(Partition, TunedWorkgroupIsPreliminarilyTheWholeNdrange) {
  const NdRange range(Dims{37, 33, 3});
  absl::StatusOr<Partition> p = partition(Kernel(), &range, nullptr);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->tune_workgroup);
  EXPECT_EQ(p->workgroup, (Dims{37, 33, 3}));
  EXPECT_EQ(p->blocks, (Dims{1, 1, 1}));
  EXPECT_FALSE(p->dynamic_check);
  EXPECT_FALSE(p->static_blocks);
}

TEST(Partition, TunedWorkgroupWithStaticNdrange) {
  const NdRange stat(Dims{4096});  // bigger than any device's workgroup: only preliminary
  absl::StatusOr<Partition> p = partition(Kernel(stat), nullptr, nullptr);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->tune_workgroup);
  EXPECT_EQ(p->ndrange, stat);
  EXPECT_EQ(p->workgroup, (Dims{4096}));
  EXPECT_EQ(p->blocks, (Dims{1}));
  EXPECT_FALSE(p->static_blocks);  // tuning must not change what is compiled

  // With a (matching) launch ndrange too.
  absl::StatusOr<Partition> q = partition(Kernel(stat), &stat, nullptr);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_TRUE(q->tune_workgroup);
  EXPECT_FALSE(q->static_blocks);
}

TEST(Partition, TunedWorkgroupWithStaticOffsetNdrange) {
  const NdRange stat(Dims{9, 5}, Dims{0, -2});
  absl::StatusOr<Partition> p = partition(Kernel(stat), nullptr, nullptr);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->tune_workgroup);
  EXPECT_EQ(p->workgroup, (Dims{9, 5}));
  EXPECT_EQ(p->blocks, (Dims{1, 1}));
}

// ---- Static blocks ---------------------------------------------------------------

TEST(Partition, StaticBlocksOnlyWhenNdrangeAndWorkgroupAreStatic) {
  const NdRange range(Dims{16, 8});
  const Dims wgs{4, 4};
  {
    absl::StatusOr<Partition> p = partition(Kernel(range, wgs), nullptr, nullptr);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_TRUE(p->static_blocks);
    EXPECT_EQ(p->blocks, (Dims{4, 2}));
    EXPECT_FALSE(p->dynamic_check);
  }
  {  // static both, launch repeats them
    absl::StatusOr<Partition> p = partition(Kernel(range, wgs), &range, &wgs);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_TRUE(p->static_blocks);
  }
  {  // static ndrange, given workgroup
    absl::StatusOr<Partition> p = partition(Kernel(range), nullptr, &wgs);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_FALSE(p->static_blocks);
  }
  {  // static ndrange, tuned workgroup
    absl::StatusOr<Partition> p = partition(Kernel(range), nullptr, nullptr);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_FALSE(p->static_blocks);
  }
  {  // dynamic ndrange, static workgroup
    absl::StatusOr<Partition> p = partition(Kernel(std::nullopt, wgs), &range, nullptr);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_FALSE(p->static_blocks);
  }
  {  // both dynamic
    absl::StatusOr<Partition> p = partition(Kernel(), &range, &wgs);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_FALSE(p->static_blocks);
  }
}

TEST(Partition, StaticSizesThatDoNotDivideNeedABoundsCheck) {
  const NdRange range(Dims{17});
  absl::StatusOr<Partition> p = partition(Kernel(range, Dims{4}), nullptr, nullptr);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->static_blocks);
  EXPECT_TRUE(p->dynamic_check);
  EXPECT_EQ(p->blocks, (Dims{5}));
}

// ---- Rank and sign errors --------------------------------------------------------

TEST(Partition, WorkgroupRankAboveNdrangeRankIsAnError) {
  const NdRange range(Dims{16});
  const Dims wgs{4, 4};
  absl::StatusOr<Partition> p = partition(Kernel(), &range, &wgs);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(MessageHas(p.status(), "saxpy"));
  EXPECT_TRUE(MessageHas(p.status(), "(4, 4)"));
  EXPECT_TRUE(MessageHas(p.status(), "(16)"));

  // A static workgroup of too high a rank, too.
  absl::StatusOr<Partition> q = partition(Kernel(std::nullopt, Dims{4, 4}), &range, nullptr);
  ASSERT_FALSE(q.ok());
  EXPECT_TRUE(MessageHas(q.status(), "(4, 4)"));
}

TEST(Partition, NegativeExtentIsAnError) {
  const NdRange range(Dims{16, -3});
  const Dims wgs{4};
  absl::StatusOr<Partition> p = partition(Kernel(), &range, &wgs);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(MessageHas(p.status(), "saxpy"));
  EXPECT_TRUE(MessageHas(p.status(), "-3"));

  // Also when tuned (the preliminary workgroup would be negative) and static.
  EXPECT_FALSE(partition(Kernel(), &range, nullptr).ok());
  EXPECT_FALSE(partition(Kernel(range), nullptr, &wgs).ok());
}

TEST(Partition, NegativeWorkgroupIsAnError) {
  const NdRange range(Dims{16, 16});
  const Dims wgs{4, -2};
  absl::StatusOr<Partition> p = partition(Kernel(), &range, &wgs);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(MessageHas(p.status(), "saxpy"));
  EXPECT_TRUE(MessageHas(p.status(), "(4, -2)"));

  EXPECT_FALSE(partition(Kernel(std::nullopt, wgs), &range, nullptr).ok());
}

// ---- partition_blocks (used again after tuning) --------------------------------------

TEST(PartitionBlocks, RepartitionsWithTheTunedWorkgroup) {
  const NdRange range(Dims{1000, 3});
  absl::StatusOr<Partition> p = partition_blocks("saxpy", range, Dims{256, 3});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->blocks, (Dims{4, 1}));
  EXPECT_TRUE(p->dynamic_check);
  EXPECT_FALSE(p->tune_workgroup);
  EXPECT_FALSE(p->static_blocks);
}

TEST(PartitionBlocks, HugeExtentsDoNotOverflow) {
  const NdRange range(Dims{INT64_MAX, INT64_MAX});
  absl::StatusOr<Partition> p = partition_blocks("saxpy", range, Dims{2, INT64_MAX});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->blocks, (Dims{INT64_MAX / 2 + 1, 1}));
  EXPECT_TRUE(p->dynamic_check);
}

}  // namespace
}  // namespace kad
