// DESIGN §3 conformance cases, launched as real kernels on PoCL. Outputs are
// poisoned first and every element is checked, so an unwritten or misplaced
// element fails.
#include <cstdint>
#include <numeric>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/support/index_kernel.h"
#include "tests/support/pocl.h"

namespace kad {
namespace {

using testing::expected_record;
using testing::kFields;
using testing::kIndexKernel;
using testing::kPoison;
using testing::PoclTest;

enum class Sizes { kDynamic, kStaticNdrange, kStaticWorkgroup, kStaticBoth };

struct IndexCase {
  NdRange ndrange;
  std::optional<Dims> workgroup;  // none: tuned
  Sizes sizes;
};

std::string case_name(const IndexCase& c) {
  std::string name = "nd";
  for (int d = 0; d < c.ndrange.rank(); ++d) {
    absl::StrAppend(&name, "_", c.ndrange.extents[d]);
    if (c.ndrange.offsets[d] != 0)
      absl::StrAppend(&name, "at", c.ndrange.offsets[d] < 0 ? "m" : "",
                      std::abs(c.ndrange.offsets[d]));
  }
  name += "__wg";
  if (!c.workgroup)
    name += "_tuned";
  else
    for (int d = 0; d < c.workgroup->rank; ++d) absl::StrAppend(&name, "_", (*c.workgroup)[d]);
  static const char* kSizes[] = {"__dynamic", "__static_ndrange", "__static_workgroup",
                                 "__static_both"};
  return name + kSizes[static_cast<int>(c.sizes)];
}

// gtest prints parameters in test listings (and so in CTest's test names).
void PrintTo(const IndexCase& c, std::ostream* os) { *os << case_name(c); }

std::vector<IndexCase> index_cases() {
  const std::vector<NdRange> ranges = {
      NdRange(Dims{}),
      NdRange(Dims{7}),
      NdRange(Dims{37}),
      NdRange(Dims{5, 7}),
      NdRange(Dims{33, 3}),
      NdRange(Dims{3, 5, 7}),
      NdRange(Dims{2, 3, 4, 5}),
      NdRange(Dims{9, 5}, Dims{0, -2}),  // static ndrange with offsets, as (0:8, -2:2)
  };
  const std::vector<std::optional<Dims>> workgroups = {std::nullopt, Dims{4}, Dims{2, 3},
                                                       Dims{4, 1, 2}};
  std::vector<IndexCase> cases;
  for (const NdRange& r : ranges) {
    for (const auto& wg : workgroups) {
      if (wg && wg->rank > r.rank()) continue;  // a workgroup cannot have more dimensions
      cases.push_back({r, wg, Sizes::kDynamic});
      cases.push_back({r, wg, Sizes::kStaticNdrange});
      if (wg) {
        cases.push_back({r, wg, Sizes::kStaticWorkgroup});
        cases.push_back({r, wg, Sizes::kStaticBoth});
      }
    }
  }
  return cases;
}

class IndexQueries : public PoclTest, public ::testing::WithParamInterface<IndexCase> {};

TEST_P(IndexQueries, EveryQueryMatchesTheColumnMajorLayout) {
  const IndexCase& c = GetParam();
  KernelSignature sig{"indices", std::nullopt, std::nullopt, {ArgSpec::buffer()}, ""};
  const bool static_nd = c.sizes == Sizes::kStaticNdrange || c.sizes == Sizes::kStaticBoth;
  const bool static_wg = c.sizes == Sizes::kStaticWorkgroup || c.sizes == Sizes::kStaticBoth;
  if (static_nd) sig.static_ndrange = c.ndrange;
  if (static_wg) sig.static_workgroup = c.workgroup;
  auto kernel = make_kernel(kIndexKernel, sig);
  ASSERT_NE(kernel, nullptr);

  int64_t n = 1;
  ASSERT_TRUE(checked_product(c.ndrange.extents, &n));
  const int64_t guard = 64;  // poisoned records after the end catch stray writes
  auto out = make_buffer<int64_t>(static_cast<size_t>((n + guard) * kFields), kPoison);
  const KernelArg args[] = {KernelArg::of_buffer(*out)};
  auto result = run(*kernel, static_nd ? nullptr : &c.ndrange,
                    (c.workgroup && !static_wg) ? &*c.workgroup : nullptr, args);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_FALSE(result->empty);
  if (c.workgroup) {
    Dims padded = Dims::filled(c.ndrange.rank(), 1);
    for (int d = 0; d < c.workgroup->rank; ++d) padded[d] = (*c.workgroup)[d];
    EXPECT_EQ(result->workgroup, padded);
  }

  const std::vector<int64_t> got = download<int64_t>(*out);
  for (int64_t i = 0; i < n; ++i) {
    const std::vector<int64_t> want =
        expected_record(i, c.ndrange, result->workgroup, result->groups);
    const std::vector<int64_t> have(got.begin() + i * kFields, got.begin() + (i + 1) * kFields);
    ASSERT_EQ(have, want) << "work-item " << i << " of " << to_string(c.ndrange) << ", workgroup "
                          << to_string(result->workgroup) << ", " << to_string(result->choice);
  }
  for (size_t i = static_cast<size_t>(n * kFields); i < got.size(); ++i)
    ASSERT_EQ(got[i], kPoison) << "write past the ndrange at long " << i;
}

INSTANTIATE_TEST_SUITE_P(Conformance, IndexQueries, ::testing::ValuesIn(index_cases()),
                         [](const auto& info) { return case_name(info.param); });

}  // namespace
}  // namespace kad
