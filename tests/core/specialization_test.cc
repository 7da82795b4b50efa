// Stage 3 of the launch pipeline (DESIGN §3.3): specialize(), the defines the
// prelude reads, and the cache key.
#include "core/specialization.h"

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "core/partition.h"
#include "core/select_launch.h"
#include "core/tune.h"
#include "gtest/gtest.h"
#include "tests/support/core_fixtures.h"

namespace kad {
namespace {

using testing::Choice;
using testing::CudaLimits;
using testing::Kernel;

// Partitions and specialises a launch the way the pipeline does (before tuning).
Specialization Specialize(const KernelSignature& k, const NdRange* ndrange, const Dims* wgs) {
  absl::StatusOr<Partition> p = partition(k, ndrange, wgs);
  EXPECT_TRUE(p.ok()) << p.status();
  if (!p.ok()) return {};
  absl::StatusOr<LaunchChoice> c = select_launch(
      k.entry, p->ndrange.extents, p->tune_workgroup ? nullptr : &p->workgroup, CudaLimits());
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok()) return {};
  return specialize(k, *p, *c);
}

::testing::AssertionResult Has(const std::string& text, absl::string_view needle) {
  if (absl::StrContains(text, needle)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << needle << "\" not in:\n" << text;
}

// ---- specialize ----------------------------------------------------------------------

TEST(Specialize, BothStaticAndEvenlyDividingHasNoBoundsCheck) {
  const Specialization s = Specialize(Kernel(NdRange(Dims{16}), Dims{4}), nullptr, nullptr);
  ASSERT_TRUE(s.static_blocks.has_value());
  EXPECT_EQ(*s.static_blocks, (Dims{4}));
  EXPECT_FALSE(s.check_bounds);
  ASSERT_TRUE(s.static_ndrange.has_value());
  EXPECT_EQ(*s.static_ndrange, NdRange(Dims{16}));
  ASSERT_TRUE(s.static_workgroup.has_value());
  EXPECT_EQ(*s.static_workgroup, (Dims{4}));
  EXPECT_EQ(s.choice, Choice(1, false, 32));

  const Specialization t =
      Specialize(Kernel(NdRange(Dims{64, 6, 4}), Dims{16, 3, 2}), nullptr, nullptr);
  ASSERT_TRUE(t.static_blocks.has_value());
  EXPECT_EQ(*t.static_blocks, (Dims{4, 2, 2}));
  EXPECT_FALSE(t.check_bounds);
}

TEST(Specialize, BothStaticNotDividingKeepsTheBoundsCheck) {
  const Specialization s = Specialize(Kernel(NdRange(Dims{17}), Dims{4}), nullptr, nullptr);
  ASSERT_TRUE(s.static_blocks.has_value());
  EXPECT_EQ(*s.static_blocks, (Dims{5}));
  EXPECT_TRUE(s.check_bounds);

  const Specialization t = Specialize(Kernel(NdRange(Dims{64, 7}), Dims{16, 2}), nullptr, nullptr);
  EXPECT_TRUE(t.check_bounds);
}

TEST(Specialize, StaticWorkgroupIsPaddedAndZeroBecomesOne) {
  const Specialization s =
      Specialize(Kernel(NdRange(Dims{16, 8, 2}), Dims{4, 0}), nullptr, nullptr);
  ASSERT_TRUE(s.static_workgroup.has_value());
  EXPECT_EQ(*s.static_workgroup, (Dims{4, 1, 1}));
  ASSERT_TRUE(s.static_blocks.has_value());
  EXPECT_EQ(*s.static_blocks, (Dims{4, 8, 2}));
  EXPECT_FALSE(s.check_bounds);
}

TEST(Specialize, StaticNdrangeOnlyKeepsBoundsCheckAndNoStaticBlocks) {
  const NdRange range(Dims{16});
  const Dims wgs{4};  // divides evenly, but is dynamic: not compiled in
  const Specialization given = Specialize(Kernel(range), nullptr, &wgs);
  EXPECT_FALSE(given.static_blocks.has_value());
  EXPECT_FALSE(given.static_workgroup.has_value());
  EXPECT_TRUE(given.static_ndrange.has_value());
  EXPECT_TRUE(given.check_bounds);

  const Specialization tuned = Specialize(Kernel(range), nullptr, nullptr);
  EXPECT_FALSE(tuned.static_blocks.has_value());
  EXPECT_FALSE(tuned.static_workgroup.has_value());
  EXPECT_TRUE(tuned.check_bounds);
}

TEST(Specialize, StaticWorkgroupOnlyKeepsBoundsCheckAndNoStaticBlocks) {
  const NdRange range(Dims{16});
  const Specialization s = Specialize(Kernel(std::nullopt, Dims{4}), &range, nullptr);
  EXPECT_FALSE(s.static_blocks.has_value());
  EXPECT_FALSE(s.static_ndrange.has_value());
  ASSERT_TRUE(s.static_workgroup.has_value());
  EXPECT_EQ(*s.static_workgroup, (Dims{4}));
  EXPECT_TRUE(s.check_bounds);
}

TEST(Specialize, DynamicSizesHaveNothingStatic) {
  const NdRange range(Dims{16});
  const Dims wgs{4};
  const Specialization s = Specialize(Kernel(), &range, &wgs);
  EXPECT_FALSE(s.static_ndrange.has_value());
  EXPECT_FALSE(s.static_workgroup.has_value());
  EXPECT_FALSE(s.static_blocks.has_value());
  EXPECT_TRUE(s.check_bounds);
}

TEST(Specialize, StaticNdrangeKeepsItsOffsets) {
  const NdRange range(Dims{9, 5}, Dims{0, -2});
  const Specialization s = Specialize(Kernel(range, Dims{3, 5}), nullptr, nullptr);
  ASSERT_TRUE(s.static_ndrange.has_value());
  EXPECT_EQ(*s.static_ndrange, range);
  ASSERT_TRUE(s.static_blocks.has_value());
  EXPECT_EQ(*s.static_blocks, (Dims{3, 1}));
  EXPECT_FALSE(s.check_bounds);
}

TEST(Specialize, LaunchesDifferingInADynamicExtentAreEqual) {
  const Dims wgs{32};
  const NdRange a(Dims{1000}), b(Dims{12345});
  EXPECT_EQ(Specialize(Kernel(), &a, &wgs), Specialize(Kernel(), &b, &wgs));
  EXPECT_EQ(Specialize(Kernel(), &a, nullptr), Specialize(Kernel(), &b, nullptr));
  // Divisible or not makes no difference when the ndrange is dynamic.
  const NdRange c(Dims{1024});
  EXPECT_EQ(Specialize(Kernel(std::nullopt, wgs), &a, nullptr),
            Specialize(Kernel(std::nullopt, wgs), &c, nullptr));
  // Nor does the offset.
  const NdRange d(Dims{1000}, Dims{-7});
  EXPECT_EQ(Specialize(Kernel(), &a, &wgs), Specialize(Kernel(), &d, &wgs));
}

TEST(Specialize, LaunchesDifferingInAGivenWorkgroupAreEqual) {
  const NdRange range(Dims{1000, 10});
  const Dims a{32, 2}, b{7};
  EXPECT_EQ(Specialize(Kernel(), &range, &a), Specialize(Kernel(), &range, &b));
  EXPECT_EQ(Specialize(Kernel(range), nullptr, &a), Specialize(Kernel(range), nullptr, &b));
}

TEST(Specialize, TuningDoesNotChangeTheSpecialization) {
  for (const KernelSignature& k :
       {Kernel(), Kernel(NdRange(Dims{4096, 3})), Kernel(NdRange(Dims{9, 5}, Dims{0, -2}))}) {
    const NdRange range = k.static_ndrange ? *k.static_ndrange : NdRange(Dims{4096, 3});
    absl::StatusOr<Partition> prelim = partition(k, k.static_ndrange ? nullptr : &range, nullptr);
    ASSERT_TRUE(prelim.ok()) << prelim.status();
    absl::StatusOr<LaunchChoice> choice =
        select_launch(k.entry, prelim->ndrange.extents, nullptr, CudaLimits());
    ASSERT_TRUE(choice.ok()) << choice.status();
    const Specialization before = specialize(k, *prelim, *choice);
    for (uint64_t threads : {1u, 32u, 256u, 1024u}) {
      const Dims tuned =
          threads_to_workgroup(threads, prelim->ndrange.extents, *choice, CudaLimits());
      absl::StatusOr<Partition> after = partition_blocks(k.entry, prelim->ndrange, tuned);
      ASSERT_TRUE(after.ok()) << after.status();
      EXPECT_EQ(specialize(k, *after, *choice), before)
          << to_string(range) << " tuned to " << to_string(tuned);
    }
  }
}

TEST(Specialize, DifferentChoicesGiveDifferentSpecializations) {
  const NdRange a(Dims{1000}), big(Dims{int64_t{1} << 32});
  EXPECT_NE(Specialize(Kernel(), &a, nullptr), Specialize(Kernel(), &big, nullptr));  // 64-bit
  const NdRange two(Dims{10, 100}), rank(Dims{1000});
  EXPECT_NE(Specialize(Kernel(), &two, nullptr), Specialize(Kernel(), &rank, nullptr));
}

// ---- specialization_defines -------------------------------------------------------------

TEST(SpecializationDefines, DynamicSizes) {
  Specialization s;
  s.choice = Choice(2, false, 32);
  const std::string d = specialization_defines(s);
  EXPECT_TRUE(Has(d, "#define KAD_RANK 2\n"));
  EXPECT_TRUE(Has(d, "#define KAD_LINEAR 0\n"));
  EXPECT_TRUE(Has(d, "#define KAD_INDEX_BITS 32\n"));
  EXPECT_TRUE(Has(d, "#define KAD_STATIC_NDRANGE 0\n"));
  EXPECT_TRUE(Has(d, "#define KAD_STATIC_WORKGROUP 0\n"));
  EXPECT_TRUE(Has(d, "#define KAD_STATIC_BLOCKS 0\n"));
  EXPECT_TRUE(Has(d, "#define KAD_CHECK_BOUNDS 1\n"));
  EXPECT_FALSE(absl::StrContains(d, "KAD_STATIC_EXTENTS"));
  EXPECT_FALSE(absl::StrContains(d, "KAD_STATIC_GROUPSIZE"));
  EXPECT_FALSE(absl::StrContains(d, "KAD_STATIC_NGROUPS"));
}

TEST(SpecializationDefines, LinearAnd64Bit) {
  Specialization s;
  s.choice = Choice(4, true, 64);
  const std::string d = specialization_defines(s);
  EXPECT_TRUE(Has(d, "#define KAD_RANK 4\n"));
  EXPECT_TRUE(Has(d, "#define KAD_LINEAR 1\n"));
  EXPECT_TRUE(Has(d, "#define KAD_INDEX_BITS 64\n"));
}

TEST(SpecializationDefines, StaticArraysArePaddedToEightEntries) {
  const Specialization s =
      Specialize(Kernel(NdRange(Dims{9, 5}, Dims{0, -2}), Dims{3}), nullptr, nullptr);
  const std::string d = specialization_defines(s);
  EXPECT_TRUE(Has(d, "#define KAD_STATIC_NDRANGE 1\n"));
  EXPECT_TRUE(Has(d, "#define KAD_STATIC_EXTENTS 9L, 5L, 1L, 1L, 1L, 1L, 1L, 1L\n"));
  EXPECT_TRUE(Has(d, "#define KAD_STATIC_OFFSETS 0L, -2L, 0L, 0L, 0L, 0L, 0L, 0L\n"));
  EXPECT_TRUE(Has(d, "#define KAD_STATIC_WORKGROUP 1\n"));
  EXPECT_TRUE(Has(d, "#define KAD_STATIC_GROUPSIZE 3L, 1L, 1L, 1L, 1L, 1L, 1L, 1L\n"));
  EXPECT_TRUE(Has(d, "#define KAD_STATIC_BLOCKS 1\n"));
  EXPECT_TRUE(Has(d, "#define KAD_STATIC_NGROUPS 3L, 5L, 1L, 1L, 1L, 1L, 1L, 1L\n"));
  EXPECT_TRUE(Has(d, "#define KAD_CHECK_BOUNDS 0\n"));
  EXPECT_TRUE(Has(d, "#define KAD_RANK 2\n"));
}

TEST(SpecializationDefines, RankZeroStaticArraysAreAllPadding) {
  const Specialization s = Specialize(Kernel(NdRange(Dims{}), Dims{}), nullptr, nullptr);
  const std::string d = specialization_defines(s);
  EXPECT_TRUE(Has(d, "#define KAD_RANK 0\n"));
  EXPECT_TRUE(Has(d, "#define KAD_STATIC_EXTENTS 1L, 1L, 1L, 1L, 1L, 1L, 1L, 1L\n"));
  EXPECT_TRUE(Has(d, "#define KAD_STATIC_OFFSETS 0L, 0L, 0L, 0L, 0L, 0L, 0L, 0L\n"));
  EXPECT_TRUE(Has(d, "#define KAD_CHECK_BOUNDS 0\n"));
}

TEST(SpecializationDefines, StaticNdrangeWithDynamicWorkgroup) {
  const Specialization s = Specialize(Kernel(NdRange(Dims{16, 16})), nullptr, nullptr);
  const std::string d = specialization_defines(s);
  EXPECT_TRUE(Has(d, "#define KAD_STATIC_NDRANGE 1\n"));
  EXPECT_TRUE(Has(d, "#define KAD_STATIC_EXTENTS 16L, 16L, 1L, 1L, 1L, 1L, 1L, 1L\n"));
  EXPECT_TRUE(Has(d, "#define KAD_STATIC_WORKGROUP 0\n"));
  EXPECT_TRUE(Has(d, "#define KAD_STATIC_BLOCKS 0\n"));
  EXPECT_TRUE(Has(d, "#define KAD_CHECK_BOUNDS 1\n"));
}

TEST(SpecializedSource, DefinesThenPreludeThenUserSourceAtLineOne) {
  Specialization s;
  const std::string src = specialised_source(s, "kernel void k() {}");
  const std::string defines = specialization_defines(s);
  EXPECT_EQ(src.rfind(defines, 0), 0u);
  EXPECT_TRUE(Has(src, "\n#line 1\nkernel void k() {}\n"));
  EXPECT_FALSE(prelude_source().empty());
  EXPECT_TRUE(Has(src, std::string(prelude_source())));
}

// ---- SpecializationKey::canonical ----------------------------------------------------------

SpecializationKey BaseKey() {
  SpecializationKey k;
  k.module_digest = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
  k.entry = "saxpy";
  k.device_id = "pocl:0";
  k.spec = Specialize(Kernel(NdRange(Dims{16, 8}, Dims{0, -2}), Dims{4, 4}), nullptr, nullptr);
  k.compiler_options = "-cl-fast-relaxed-math";
  k.toolchain_version = "clang 15.0.6; pocl 3.1";
  return k;
}

TEST(SpecializationKey, EqualKeysHaveEqualCanonicalForms) {
  EXPECT_EQ(BaseKey().canonical(), BaseKey().canonical());
  // Built the same way from a different launch of the same static kernel.
  SpecializationKey other = BaseKey();
  const NdRange same(Dims{16, 8}, Dims{0, -2});
  const Dims wgs{4, 4};
  other.spec = Specialize(Kernel(same, wgs), &same, &wgs);
  EXPECT_EQ(other.canonical(), BaseKey().canonical());
}

TEST(SpecializationKey, CanonicalDiffersWhenAnyFieldDiffers) {
  const std::string base = BaseKey().canonical();
  const std::vector<std::pair<std::string, std::function<void(SpecializationKey&)>>> changes = {
      {"module digest", [](SpecializationKey& k) { k.module_digest[0] = 'a'; }},
      {"entry", [](SpecializationKey& k) { k.entry = "saxpy2"; }},
      {"signature", [](SpecializationKey& k) { k.signature = "const buffer"; }},
      {"device", [](SpecializationKey& k) { k.device_id = "pocl:1"; }},
      {"choice linear", [](SpecializationKey& k) { k.spec.choice.linear = true; }},
      {"choice bits", [](SpecializationKey& k) { k.spec.choice.index_bits = 64; }},
      {"choice rank", [](SpecializationKey& k) { k.spec.choice.rank = 3; }},
      {"static ndrange extents",
       [](SpecializationKey& k) { k.spec.static_ndrange->extents[0] = 17; }},
      {"static ndrange offsets",
       [](SpecializationKey& k) { k.spec.static_ndrange->offsets[1] = 0; }},
      {"static ndrange dynamic", [](SpecializationKey& k) { k.spec.static_ndrange.reset(); }},
      {"static workgroup", [](SpecializationKey& k) { (*k.spec.static_workgroup)[1] = 2; }},
      {"static workgroup dynamic", [](SpecializationKey& k) { k.spec.static_workgroup.reset(); }},
      {"static blocks", [](SpecializationKey& k) { (*k.spec.static_blocks)[0] = 5; }},
      {"static blocks dynamic", [](SpecializationKey& k) { k.spec.static_blocks.reset(); }},
      {"check bounds", [](SpecializationKey& k) { k.spec.check_bounds = !k.spec.check_bounds; }},
      {"options", [](SpecializationKey& k) { k.compiler_options = ""; }},
      {"options appended", [](SpecializationKey& k) { k.compiler_options += " -DN=1"; }},
      {"toolchain", [](SpecializationKey& k) { k.toolchain_version = "clang 15.0.7; pocl 3.1"; }},
  };
  std::vector<std::string> all = {base};
  for (const auto& [what, change] : changes) {
    SpecializationKey k = BaseKey();
    change(k);
    const std::string c = k.canonical();
    EXPECT_NE(c, base) << what;
    for (const std::string& seen : all) EXPECT_NE(c, seen) << what << " collides";
    all.push_back(c);
  }
}

TEST(SpecializationKey, FieldsDoNotRunIntoEachOther) {
  // Moving text from one field into the next must change the key.
  SpecializationKey a = BaseKey(), b = BaseKey();
  a.entry = "sax";
  a.device_id = "pypocl:0";
  b.entry = "saxpy";
  b.device_id = "pocl:0";
  EXPECT_NE(a.canonical(), b.canonical());
  SpecializationKey c = BaseKey(), d = BaseKey();
  c.compiler_options = "-O2";
  c.toolchain_version = "x";
  d.compiler_options = "-O2 x";
  d.toolchain_version = "";
  EXPECT_NE(c.canonical(), d.canonical());
}

TEST(SpecializationKey, DynamicExtentOrTunedWorkgroupLeaveTheKeyUnchanged) {
  SpecializationKey a = BaseKey(), b = BaseKey();
  const NdRange r1(Dims{1000}), r2(Dims{2000});
  a.spec = Specialize(Kernel(), &r1, nullptr);
  b.spec = Specialize(Kernel(), &r2, nullptr);
  EXPECT_EQ(a.canonical(), b.canonical());
}

}  // namespace
}  // namespace kad
