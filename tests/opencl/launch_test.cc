// Launch behaviours of DESIGN §3 beyond the index queries, on PoCL: tuning
// under a static ndrange, empty ndranges, many arguments, barriers reached by
// padding lanes, 64-bit indices.
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/support/pocl.h"

namespace kad {
namespace {

using testing::PoclTest;

constexpr char kIota[] = R"(
kernel void iota(KAD_CONTEXT, global long* out) {
  if (kad_active()) out[kad_global_linear()] = kad_global_linear();
}
)";

KernelSignature iota_signature() {
  return {"iota", std::nullopt, std::nullopt, {ArgSpec::buffer()}, ""};
}

class Launch : public PoclTest {};

TEST_F(Launch, StaticNdrangeLargerThanTheMaximumWorkgroupIsTuned) {
  // The preliminary workgroup (the whole ndrange) exceeds the device's
  // maximum; tuning must replace it before validation, without recompiling.
  // A fixed size beyond every device's maximum (PoCL 4096, GPUs 1024), so the
  // kernel is the same everywhere (and can be lowered ahead for a GPU node).
  const int64_t n = 2 * 4096 + 3;
  ASSERT_GT(static_cast<uint64_t>(n), device().info().limits.max_workgroup_size);
  KernelSignature sig = iota_signature();
  sig.static_ndrange = NdRange(Dims{n});
  auto kernel = make_kernel(kIota, sig);
  auto out = make_buffer<int64_t>(static_cast<size_t>(n), -1);
  const KernelArg args[] = {KernelArg::of_buffer(*out)};
  auto r = run(*kernel, nullptr, nullptr, args);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_LE(static_cast<uint64_t>(r->workgroup[0]), device().info().limits.max_workgroup_size);
  std::vector<int64_t> got = download<int64_t>(*out);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[static_cast<size_t>(i)], i);
  EXPECT_EQ(cache().stats().compilations, 1u);
}

TEST_F(Launch, LaunchNdrangeDifferingFromTheStaticOneIsAnError) {
  KernelSignature sig = iota_signature();
  sig.static_ndrange = NdRange(Dims{9, 5}, Dims{0, -2});
  auto kernel = make_kernel(kIota, sig);
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

TEST_F(Launch, EmptyNdrangesCompleteAtOnceWithoutCompilingOrRunning) {
  auto kernel = make_kernel(kIota, iota_signature());
  auto out = make_buffer<int64_t>(16, -1);
  const KernelArg args[] = {KernelArg::of_buffer(*out)};
  for (const Dims& extents : {Dims{0}, Dims{5, 0}, Dims{2, 0, 2, 2}}) {
    const NdRange range(extents);
    auto r = launch(*kernel, queue(), cache(), {&range, nullptr, args});
    ASSERT_TRUE(r.ok()) << to_string(extents) << ": " << r.status();
    EXPECT_TRUE(r->empty);
    EXPECT_EQ(r->event, 0u) << "an empty launch's event is already complete";
    EXPECT_TRUE(queue().wait(r->event).ok());
  }
  EXPECT_EQ(cache().stats().compilations, 0u);
  for (int64_t v : download<int64_t>(*out)) EXPECT_EQ(v, -1);
}

TEST_F(Launch, FortyArgumentsArriveInOrder) {
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

TEST_F(Launch, BarriersAreReachedByPaddingLanes) {
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

TEST_F(Launch, RankFourRunsAsALinearLaunch) {
  auto kernel = make_kernel(kIota, iota_signature());
  const NdRange range(Dims{2, 3, 4, 5});
  auto out = make_buffer<int64_t>(120, -1);
  const KernelArg args[] = {KernelArg::of_buffer(*out)};
  const Dims wg{2, 3};
  auto r = run(*kernel, &range, &wg, args);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->choice.linear);
  EXPECT_EQ(r->choice.index_bits, 32);
  std::vector<int64_t> got = download<int64_t>(*out);
  for (int64_t i = 0; i < 120; ++i) ASSERT_EQ(got[i], i);
}

TEST_F(Launch, MoreThanTwoToTheThirtyOneItemsUseSixtyFourBitIndices) {
  // 2^31 + 2^16 work-items: only the last lane writes, so the run is short.
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
  auto kernel = make_kernel(kLast, {"last", std::nullopt, std::nullopt, {ArgSpec::buffer()}, ""});
  const NdRange range(Dims{65536, 32769});
  auto out = make_buffer<int64_t>(4, -1);
  const KernelArg args[] = {KernelArg::of_buffer(*out)};
  auto r = run(*kernel, &range, nullptr, args);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->choice.index_bits, 64);
  const int64_t n = int64_t{65536} * 32769;
  EXPECT_EQ(download<int64_t>(*out), (std::vector<int64_t>{n - 1, 65535, 32768, 8}));
}

}  // namespace
}  // namespace kad
