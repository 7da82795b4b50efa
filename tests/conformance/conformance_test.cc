// DESIGN §3's conformance cases, launched as real kernels through the
// pipeline on every device the registry finds (tests/support/pocl.h:
// test_devices(); KAD_TEST_DEVICE keeps one). Every test's name ends with its
// device's id (Conformance/IndexQueries.*/opencl_pocl_0__nd_7__wg_4__dynamic).
// Outputs are poisoned first and every element is checked, so an unwritten or
// misplaced element fails. Device limits come from the device itself, never
// from a constant, so that the same cases hold on PoCL and on every GPU.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/index_kernel.h"
#include "tests/support/pocl.h"

namespace kad {
namespace {

using testing::expected_record;
using ::testing::HasSubstr;
using testing::kFields;
using testing::kIndexKernel;
using testing::kPoison;

// The ids of the devices to run on. None found: one entry naming none, whose
// tests fail with discovery's log rather than vanish.
constexpr char kNoDevice[] = "no device";
std::vector<std::string> device_ids() {
  std::vector<std::string> ids;
  for (Device* d : testing::test_devices()) ids.push_back(d->info().id);
  if (ids.empty()) ids.push_back(kNoDevice);
  return ids;
}

// A DeviceTest on the device a test's parameter names.
class OnDevice : public testing::DeviceTest {
 protected:
  void set_up_on(const std::string& id) {
    Device* device = testing::test_registry().find(id);
    if (device == nullptr) {
      std::string log;
      for (const std::string& line : testing::test_registry().log) log += line + "\n";
      const char* chosen = std::getenv("KAD_TEST_DEVICE");
      FAIL() << "no device to run on"
             << (chosen ? absl::StrCat(" (KAD_TEST_DEVICE=", chosen, ")") : std::string())
             << "; discovery said:\n"
             << log;
    }
    use_device(*device);
  }
  const DeviceLimits& limits() { return device().info().limits; }
};

// ---- every index query, for every ndrange x workgroup x static/dynamic -------------------

enum class Sizes { kDynamic, kStaticNdrange, kStaticWorkgroup, kStaticBoth };

struct IndexCase {
  NdRange ndrange;
  std::optional<Dims> workgroup;  // none: tuned
  Sizes sizes;
};

std::string case_name(const IndexCase& c) {
  const std::string name = testing::launch_shape_name(c.ndrange, c.workgroup);
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

class IndexQueries : public OnDevice,
                     public ::testing::WithParamInterface<std::tuple<std::string, IndexCase>> {
 protected:
  void SetUp() override { set_up_on(std::get<0>(GetParam())); }
};

TEST_P(IndexQueries, EveryQueryMatchesTheColumnMajorLayout) {
  const IndexCase& c = std::get<1>(GetParam());
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

INSTANTIATE_TEST_SUITE_P(Conformance, IndexQueries,
                         ::testing::Combine(::testing::ValuesIn(device_ids()),
                                            ::testing::ValuesIn(index_cases())),
                         [](const auto& info) {
                           return testing::test_name_of(std::get<0>(info.param)) + "__" +
                                  case_name(std::get<1>(info.param));
                         });

// ---- the other launch cases, once per device ---------------------------------------------

class Launches : public OnDevice, public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override { set_up_on(GetParam()); }
};

constexpr char kIota[] = R"(
kernel void iota(KAD_CONTEXT, global long* out) {
  if (kad_active()) out[kad_global_linear()] = kad_global_linear();
}
)";

KernelSignature iota_signature() {
  return {"iota", std::nullopt, std::nullopt, {ArgSpec::buffer()}, ""};
}

TEST_P(Launches, StaticNdrangeLargerThanTheMaximumWorkgroupIsTuned) {
  // The preliminary workgroup (the whole ndrange) exceeds the device's
  // maximum; tuning must replace it before validation, without recompiling.
  // A fixed size beyond every device's maximum (PoCL 4096, GPUs 1024), so the
  // kernel is the same everywhere (and can be lowered ahead for a GPU node).
  const int64_t n = 2 * 4096 + 3;
  ASSERT_GT(static_cast<uint64_t>(n), limits().max_workgroup_size);
  KernelSignature sig = iota_signature();
  sig.static_ndrange = NdRange(Dims{n});
  auto kernel = make_kernel(kIota, sig);
  ASSERT_NE(kernel, nullptr);
  auto out = make_buffer<int64_t>(static_cast<size_t>(n), -1);
  const KernelArg args[] = {KernelArg::of_buffer(*out)};
  auto r = run(*kernel, nullptr, nullptr, args);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_LE(static_cast<uint64_t>(r->workgroup[0]), limits().max_workgroup_size);
  std::vector<int64_t> got = download<int64_t>(*out);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[static_cast<size_t>(i)], i);
  EXPECT_EQ(cache().stats().compilations, 1u);
}

TEST_P(Launches, LaunchNdrangeDifferingFromTheStaticOneIsAnError) {
  KernelSignature sig = iota_signature();
  sig.static_ndrange = NdRange(Dims{9, 5}, Dims{0, -2});
  auto kernel = make_kernel(kIota, sig);
  ASSERT_NE(kernel, nullptr);
  auto out = make_buffer<int64_t>(64, -1);
  const KernelArg args[] = {KernelArg::of_buffer(*out)};
  const NdRange other(Dims{9, 5});  // same extents, no offsets
  auto r = run(*kernel, &other, nullptr, args);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "kernel `iota`: static ndrange (0:8, -2:2) and launch ndrange (9, 5) differ");
  // The same ndrange given explicitly is accepted.
  const NdRange same(Dims{9, 5}, Dims{0, -2});
  EXPECT_TRUE(run(*kernel, &same, nullptr, args).ok());
}

TEST_P(Launches, EmptyNdrangesCompleteAtOnceWithoutCompilingOrRunning) {
  auto kernel = make_kernel(kIota, iota_signature());
  ASSERT_NE(kernel, nullptr);
  auto out = make_buffer<int64_t>(16, -1);
  const KernelArg args[] = {KernelArg::of_buffer(*out)};
  const int64_t huge = int64_t{1} << 40;  // empty, however large the other extents
  for (const Dims& extents : {Dims{0}, Dims{5, 0}, Dims{2, 0, 2, 2}, Dims{huge, huge, 0}}) {
    const NdRange range(extents);
    auto r = launch(*kernel, queue(), cache(), {&range, nullptr, args});
    ASSERT_TRUE(r.ok()) << to_string(extents) << ": " << r.status();
    EXPECT_TRUE(r->empty) << to_string(extents);
    EXPECT_EQ(r->event, 0u) << "an empty launch's event is already complete";
    EXPECT_TRUE(queue().wait(r->event).ok());
  }
  EXPECT_EQ(cache().stats().compilations, 0u);
  for (int64_t v : download<int64_t>(*out)) EXPECT_EQ(v, -1);
}

TEST_P(Launches, FortyArgumentsArriveInOrder) {
  // 20 const buffers and 20 int scalars: out[i] = sum_k in_k[i] * s_k.
  constexpr int kPairs = 20;
  std::string params, body;
  KernelSignature sig{"forty", std::nullopt, std::nullopt, {}, ""};
  for (int k = 0; k < kPairs; ++k) {
    absl::StrAppend(&params, ", const global int* restrict in", k, ", int s", k);
    absl::StrAppend(&body, " + in", k, "[i] * s", k);
    sig.args.push_back(ArgSpec::const_buffer());
    sig.args.push_back(ArgSpec::scalar_of(ScalarType::kI32));
  }
  sig.args.push_back(ArgSpec::buffer());
  const std::string source =
      absl::StrCat("kernel void forty(KAD_CONTEXT", params, ", global int* out) {\n",
                   "  if (!kad_active()) return;\n  long i = kad_global_linear();\n  out[i] = 0",
                   body, ";\n}\n");
  ASSERT_EQ(sig.args.size(), 41u);
  auto kernel = make_kernel(source, sig);
  ASSERT_NE(kernel, nullptr);

  const int64_t n = 100;
  std::vector<std::unique_ptr<Buffer>> inputs;
  std::vector<KernelArg> args;
  std::vector<int32_t> want(n, 0);
  for (int k = 0; k < kPairs; ++k) {
    std::vector<int32_t> in(n);
    for (int64_t i = 0; i < n; ++i) in[i] = static_cast<int32_t>(i + 1000 * k);
    inputs.push_back(upload(std::span<const int32_t>(in)));
    const int32_t s = k + 1;
    args.push_back(KernelArg::of_buffer(*inputs.back()));
    args.push_back(KernelArg::of_scalar(s));
    for (int64_t i = 0; i < n; ++i) want[i] += in[i] * s;
  }
  auto out = make_buffer<int32_t>(n, -1);
  args.push_back(KernelArg::of_buffer(*out));
  const NdRange range(Dims{n});
  auto r = run(*kernel, &range, nullptr, args);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(download<int32_t>(*out), want);
}

TEST_P(Launches, BarriersAreReachedByPaddingLanes) {
  // Every lane of a workgroup, padding lanes included, stores into local
  // memory and meets the barrier; active lanes then read their neighbour.
  constexpr char kNeighbours[] = R"(
kernel void neighbours(KAD_CONTEXT, global const int* restrict in, global int* out, local int* tile) {
  const long l = kad_local_linear();
  const long size = kad_groupsize(0);
  tile[l] = kad_active() ? in[kad_global_linear()] : -1;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (kad_active()) out[kad_global_linear()] = tile[(l + 1) % size];
}
)";
  KernelSignature sig{"neighbours",
                      std::nullopt,
                      Dims{8},
                      {ArgSpec::const_buffer(), ArgSpec::buffer(), ArgSpec::local()},
                      ""};
  auto kernel = make_kernel(kNeighbours, sig);
  ASSERT_NE(kernel, nullptr);
  const int64_t n = 37;  // 5 groups of 8, the last with 3 padding lanes
  std::vector<int32_t> in(n);
  std::iota(in.begin(), in.end(), 100);
  auto bin = upload(std::span<const int32_t>(in));
  auto out = make_buffer<int32_t>(n, -7);
  const KernelArg args[] = {KernelArg::of_buffer(*bin), KernelArg::of_buffer(*out),
                            KernelArg::of_local(8 * sizeof(int32_t))};
  const NdRange range(Dims{n});
  auto r = run(*kernel, &range, nullptr, args);
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<int32_t> got = download<int32_t>(*out);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t group = i / 8, lane = i % 8, next = group * 8 + (lane + 1) % 8;
    EXPECT_EQ(got[i], next < n ? in[next] : -1) << "element " << i;
  }
}

// Local memory is checked as a whole: two sizes that wrap around 2^64 to a
// small total are refused, naming the overflow, and nothing runs.
TEST_P(Launches, LocalMemorySizesThatWrapAroundAreRefused) {
  constexpr char kTwoTiles[] = R"(
kernel void two_tiles(KAD_CONTEXT, global int* out, local int* a, local int* b) {
  if (kad_active()) out[kad_global_linear()] = 1;
}
)";
  KernelSignature sig{"two_tiles",
                      std::nullopt,
                      std::nullopt,
                      {ArgSpec::buffer(), ArgSpec::local(), ArgSpec::local()},
                      ""};
  auto kernel = make_kernel(kTwoTiles, sig);
  ASSERT_NE(kernel, nullptr);
  auto out = make_buffer<int32_t>(4, 0);
  const KernelArg args[] = {KernelArg::of_buffer(*out), KernelArg::of_local(0xFFFFFFFFFFFFFF00ull),
                            KernelArg::of_local(0x200)};
  const NdRange range(Dims{4});
  auto r = run(*kernel, &range, nullptr, args);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_NE(r.status().message().find("overflow the launch's total"), absl::string_view::npos)
      << r.status();
  EXPECT_EQ(download<int32_t>(*out), std::vector<int32_t>(4, 0));
}

// ---- select: 32- or 64-bit indices, N-d or linear, and what cannot launch -----------------

// Only the last lane writes: its linear index, its first two Cartesian
// indices and the width of the kernel's index type.
constexpr char kLast[] = R"(
kernel void last(KAD_CONTEXT, global long* out) {
  if (kad_active() && kad_global_linear() == kad_ndrange_length() - 1) {
    out[0] = kad_global_linear();
    out[1] = kad_global_index(0);
    out[2] = kad_global_index(1);
    out[3] = sizeof(kad_uint);
  }
}
)";

KernelSignature last_signature() {
  return {"last", std::nullopt, std::nullopt, {ArgSpec::buffer()}, ""};
}

TEST_P(Launches, IndexWidthFollowsThePaddedSpaceAtTheTwoToTheThirtyOneBoundary) {
  // With the workgroup still to be tuned, a 1-d ndrange of n items is bounded
  // by n + m - 1 padded items, m the most a workgroup can hold in dimension 0
  // (DESIGN §3.2): 32-bit indices up to n = 2^31 - m, 64-bit from one more.
  const int64_t m =
      static_cast<int64_t>(std::min(limits().max_workgroup_size, limits().max_workgroup_dims[0]));
  const int64_t n32 = (int64_t{1} << 31) - m;
  auto kernel = make_kernel(kLast, last_signature());
  ASSERT_NE(kernel, nullptr);
  for (const auto& [n, bits] : {std::pair{n32, 32}, std::pair{n32 + 1, 64}}) {
    SCOPED_TRACE(absl::StrCat(n, " work-items"));
    auto out = make_buffer<int64_t>(4, -1);
    const KernelArg args[] = {KernelArg::of_buffer(*out)};
    const NdRange range(Dims{n});
    auto r = run(*kernel, &range, nullptr, args);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(static_cast<int>(r->choice.index_bits), bits);
    EXPECT_FALSE(r->choice.linear);
    EXPECT_EQ(download<int64_t>(*out), (std::vector<int64_t>{n - 1, n - 1, 0, bits / 8}));
  }
}

TEST_P(Launches, MoreThanTwoToTheThirtyOneItemsInTwoDimensionsUseSixtyFourBitIndices) {
  // 2^31 + 2^16 work-items.
  auto kernel = make_kernel(kLast, last_signature());
  ASSERT_NE(kernel, nullptr);
  const NdRange range(Dims{65536, 32769});
  auto out = make_buffer<int64_t>(4, -1);
  const KernelArg args[] = {KernelArg::of_buffer(*out)};
  auto r = run(*kernel, &range, nullptr, args);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(static_cast<int>(r->choice.index_bits), 64);
  const int64_t n = int64_t{65536} * 32769;
  EXPECT_EQ(download<int64_t>(*out), (std::vector<int64_t>{n - 1, 65535, 32768, 8}));
}

TEST_P(Launches, RankFourRunsAsALinearLaunch) {
  auto kernel = make_kernel(kIota, iota_signature());
  ASSERT_NE(kernel, nullptr);
  const NdRange range(Dims{2, 3, 4, 5});
  auto out = make_buffer<int64_t>(120, -1);
  const KernelArg args[] = {KernelArg::of_buffer(*out)};
  const Dims wg{2, 3};
  auto r = run(*kernel, &range, &wg, args);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->choice.linear);
  EXPECT_EQ(static_cast<int>(r->choice.index_bits), 32);
  std::vector<int64_t> got = download<int64_t>(*out);
  for (int64_t i = 0; i < 120; ++i) ASSERT_EQ(got[i], i);
}

TEST_P(Launches, IterationSpacesBeyondTwoToTheSixtyThreeAreErrors) {
  auto kernel = make_kernel(kLast, last_signature());
  ASSERT_NE(kernel, nullptr);
  auto out = make_buffer<int64_t>(4, -1);
  const KernelArg args[] = {KernelArg::of_buffer(*out)};
  const int64_t e40 = int64_t{1} << 40, e22 = int64_t{1} << 22;
  for (const Dims& extents : {Dims{e40, e40}, Dims{e22, e22, e22, 1}}) {
    const NdRange range(extents);
    auto r = run(*kernel, &range, nullptr, args);
    ASSERT_FALSE(r.ok()) << to_string(extents);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(r.status().message()),
                HasSubstr(absl::StrCat("kernel `last`: iteration space ", to_string(extents),
                                       " has more than 2^63-1 work-items")));
  }
  EXPECT_EQ(download<int64_t>(*out), (std::vector<int64_t>(4, -1)));
}

TEST_P(Launches, AWorkgroupOfTwiceTheMaximumIsAnError) {
  auto kernel = make_kernel(kIota, iota_signature());
  ASSERT_NE(kernel, nullptr);
  const int64_t twice = 2 * static_cast<int64_t>(limits().max_workgroup_size);
  auto out = make_buffer<int64_t>(static_cast<size_t>(twice), -1);
  const KernelArg args[] = {KernelArg::of_buffer(*out)};
  const NdRange range(Dims{twice});
  const Dims wg{twice};
  auto r = run(*kernel, &range, &wg, args);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr(absl::StrCat("has ", twice, " work-items, more than ")));
  for (int64_t v : download<int64_t>(*out)) ASSERT_EQ(v, -1);
}

// The iota kernel over 64 items, and its buffer, for tests of what a queue
// says of its launches.
struct IotaLaunch {
  std::unique_ptr<Kernel> kernel;
  std::unique_ptr<Buffer> out;
  KernelArg args[1];
  NdRange range{Dims{64}};
};

// The device scheduler looks, without waiting, whether a queue's launches
// ended (Queue::ended): a launch that ended is told so, one never issued is not.
TEST_P(Launches, ALaunchThatEndedIsToldEndedWithoutWaiting) {
  IotaLaunch iota{make_kernel(kIota, iota_signature()), make_buffer<int64_t>(64, -1), {}};
  ASSERT_NE(iota.kernel, nullptr);
  iota.args[0] = KernelArg::of_buffer(*iota.out);
  auto r = launch(*iota.kernel, queue(), cache(), {&iota.range, nullptr, iota.args});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(queue().wait(r->event).ok());
  EXPECT_TRUE(queue().ended(r->event));
  EXPECT_TRUE(queue().ended(0)) << "no launch at all";
  EXPECT_FALSE(queue().ended(r->event + 1)) << "a launch never issued";
}

// A driver that calls back when a launch ends calls each registration once,
// with the launch's status, whether the launch was running or had ended.
struct CountedEnd : EndCallback {
  std::atomic<int> calls{0};
  std::atomic<bool> ok{false};
  CountedEnd() {
    ended = [](EndCallback* self, const absl::Status& status) {
      auto* c = static_cast<CountedEnd*>(self);
      c->ok.store(status.ok());
      c->calls.fetch_add(1);
    };
  }
};

TEST_P(Launches, AnEndedLaunchIsCalledBackOnceWithItsStatus) {
  // The backends that implement Queue::notify_ended.
  const std::string& backend = device().info().backend;
  if (backend != "opencl" && backend != "null")
    GTEST_SKIP() << GetParam() << " does not call back when a launch ends";
  IotaLaunch iota{make_kernel(kIota, iota_signature()), make_buffer<int64_t>(64, -1), {}};
  ASSERT_NE(iota.kernel, nullptr);
  iota.args[0] = KernelArg::of_buffer(*iota.out);
  // The driver holds pointers into these until it has called them: a test
  // that fails early leaves them to leak rather than freed under it.
  auto& ends = *new std::array<CountedEnd, 3>;
  std::array<EventId, 2> events{};
  for (size_t i = 0; i < 2; ++i) {
    auto r = launch(*iota.kernel, queue(), cache(), {&iota.range, nullptr, iota.args});
    ASSERT_TRUE(r.ok()) << r.status();
    events[i] = r->event;
    ASSERT_TRUE(queue().notify_ended(r->event, &ends[i])) << "launch " << i;
  }
  ASSERT_TRUE(queue().wait(events[1]).ok());
  // Registered after its launch ended: called at once.
  ASSERT_TRUE(queue().notify_ended(events[1], &ends[2]));
  EXPECT_FALSE(queue().notify_ended(events[1] + 1, &ends[2])) << "a launch never issued";
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (const CountedEnd& e : ends)
    while (e.calls.load() == 0 && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a second call would come now
  bool all_called = true;
  for (size_t i = 0; i < ends.size(); ++i) {
    EXPECT_EQ(ends[i].calls.load(), 1) << "registration " << i;
    EXPECT_TRUE(ends[i].ok.load()) << "registration " << i;
    all_called = all_called && ends[i].calls.load() > 0;
  }
  if (all_called) delete &ends;
  EXPECT_EQ(download<int64_t>(*iota.out)[63], 63);
}

// Memory a session frees may be handed to the next (DESIGN §8): what it
// wrote must never be readable there. Allocated, filled, freed and allocated
// again many times, so that the allocator reuses the memory.
TEST_P(Launches, FreshDeviceMemoryReadsAsZerosAfterAnotherBufferWasFreed) {
  constexpr size_t kBytes = size_t{1} << 20;
  for (int round = 0; round < 8; ++round) {
    auto fresh = device().allocate(kBytes);
    ASSERT_TRUE(fresh.ok()) << fresh.status();
    const std::vector<uint8_t> got = download<uint8_t>(**fresh);
    const auto nonzero = std::find_if(got.begin(), got.end(), [](uint8_t b) { return b != 0; });
    ASSERT_EQ(nonzero, got.end()) << "round " << round << ": byte " << (nonzero - got.begin())
                                  << " of a fresh buffer is " << int{*nonzero};
    const std::vector<uint8_t> secret(kBytes, 0xA5);
    ASSERT_TRUE(queue().write_buffer(**fresh, 0, std::as_bytes(std::span(secret))).ok());
  }
}

// A transfer that arrived in pieces (gRPC's receive slices) lands in order
// at its offset; one that would pass the buffer's end changes nothing.
TEST_P(Launches, BytesWrittenInPiecesLandInOrderAtTheirOffset) {
  constexpr size_t kBytes = 4096;
  auto buffer = device().allocate(kBytes);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  std::vector<uint8_t> bytes(3000);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i % 251 + 1);
  const std::span<const std::byte> all = std::as_bytes(std::span(bytes));
  const std::span<const std::byte> pieces[] = {all.subspan(0, 1), all.subspan(1, 0),
                                               all.subspan(1, 1999), all.subspan(2000)};
  ASSERT_TRUE(queue().write_buffer_pieces(**buffer, 96, pieces).ok());
  const std::vector<uint8_t> got = download<uint8_t>(**buffer);
  EXPECT_TRUE(std::all_of(got.begin(), got.begin() + 96, [](uint8_t b) { return b == 0; }));
  EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), got.begin() + 96));
  EXPECT_TRUE(std::all_of(got.begin() + 96 + 3000, got.end(), [](uint8_t b) { return b == 0; }));
  const absl::Status past = queue().write_buffer_pieces(**buffer, kBytes - 2999, pieces);
  EXPECT_EQ(past.code(), absl::StatusCode::kOutOfRange) << past;
  EXPECT_EQ(download<uint8_t>(**buffer), got);
}

INSTANTIATE_TEST_SUITE_P(Conformance, Launches, ::testing::ValuesIn(device_ids()),
                         [](const auto& info) { return testing::test_name_of(info.param); });

}  // namespace
}  // namespace kad
