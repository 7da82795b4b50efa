// The compiled-kernel cache (DESIGN §3.3, §5), counted by compilations on PoCL.
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/pocl.h"

namespace kad {
namespace {

using testing::PoclTest;

constexpr char kScale[] = R"(
kernel void scale(KAD_CONTEXT, global float* x, float a) {
  if (kad_active()) x[kad_global_linear()] *= a;
}
)";

KernelSignature scale_signature() {
  return {"scale",
          std::nullopt,
          std::nullopt,
          {ArgSpec::buffer(), ArgSpec::scalar_of(ScalarType::kF32)},
          ""};
}

class KernelCacheOnPocl : public PoclTest {
 protected:
  // Launches `kernel` over `range`, checks every element was scaled by 2.
  LaunchResult scale_twice(Kernel& kernel, const NdRange* range, const Dims* wg, int64_t n) {
    auto x = make_buffer<float>(static_cast<size_t>(n), 1.5f);
    const KernelArg args[] = {KernelArg::of_buffer(*x), KernelArg::of_scalar(2.0f)};
    auto r = run(kernel, range, wg, args);
    EXPECT_TRUE(r.ok()) << r.status();
    for (float v : download<float>(*x)) EXPECT_EQ(v, 3.0f);
    return r.ok() ? *r : LaunchResult{};
  }
};

TEST_F(KernelCacheOnPocl, SecondLaunchWithTheSameStaticShapeDoesNotRecompile) {
  KernelSignature sig = scale_signature();
  sig.static_ndrange = NdRange(Dims{64});
  sig.static_workgroup = Dims{16};
  auto kernel = make_kernel(kScale, sig);
  EXPECT_TRUE(scale_twice(*kernel, nullptr, nullptr, 64).compiled);
  EXPECT_FALSE(scale_twice(*kernel, nullptr, nullptr, 64).compiled);
  const KernelCache::Stats s = cache().stats();
  EXPECT_EQ(s.compilations, 1u);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.entries, 1u);
}

TEST_F(KernelCacheOnPocl, ADifferentDynamicSizeReusesTheCompiledKernel) {
  auto kernel = make_kernel(kScale, scale_signature());
  const Dims wg{8};
  for (int64_t n : {40, 64, 1000, 7}) {
    const NdRange range(Dims{n});
    scale_twice(*kernel, &range, &wg, n);
  }
  EXPECT_EQ(cache().stats().compilations, 1u);
  EXPECT_EQ(cache().stats().hits, 3u);
}

TEST_F(KernelCacheOnPocl, ADifferentTunedWorkgroupReusesTheCompiledKernel) {
  auto kernel = make_kernel(kScale, scale_signature());
  const NdRange small(Dims{10}), large(Dims{100000});
  const LaunchResult a = scale_twice(*kernel, &small, nullptr, 10);
  const LaunchResult b = scale_twice(*kernel, &large, nullptr, 100000);
  EXPECT_NE(a.workgroup, b.workgroup) << "tuning should pick different sizes";
  EXPECT_TRUE(a.compiled);
  EXPECT_FALSE(b.compiled);
  EXPECT_EQ(cache().stats().compilations, 1u);
}

TEST_F(KernelCacheOnPocl, ANewKernelObjectForTheSameCodeHitsTheSharedCache) {
  auto first = make_kernel(kScale, scale_signature());
  auto second = make_kernel(kScale, scale_signature());
  const NdRange range(Dims{32});
  EXPECT_TRUE(scale_twice(*first, &range, nullptr, 32).compiled);
  EXPECT_FALSE(scale_twice(*second, &range, nullptr, 32).compiled);
  EXPECT_EQ(cache().stats().compilations, 1u);
}

TEST_F(KernelCacheOnPocl, WhatIsCompiledInGetsItsOwnEntry) {
  // Rank, static sizes and the static workgroup are baked into the code.
  auto dynamic = make_kernel(kScale, scale_signature());
  KernelSignature fixed = scale_signature();
  fixed.static_workgroup = Dims{4};
  auto with_static_wg = make_kernel(kScale, fixed);
  const NdRange one_d(Dims{32}), two_d(Dims{4, 8});
  scale_twice(*dynamic, &one_d, nullptr, 32);
  scale_twice(*dynamic, &two_d, nullptr, 32);
  scale_twice(*with_static_wg, &one_d, nullptr, 32);
  EXPECT_EQ(cache().stats().compilations, 3u);
  EXPECT_EQ(cache().stats().entries, 3u);
}

}  // namespace
}  // namespace kad

namespace kad {
namespace {

TEST_F(KernelCacheOnPocl, PerKernelBuildOptionsAreCompiledInAndPartOfTheKey) {
  constexpr char kOffset[] = R"(
kernel void offset(KAD_CONTEXT, global int* x) {
  if (kad_active()) x[kad_global_linear()] += OFFSET;
}
)";
  const NdRange range(Dims{8});
  for (int offset : {3, 5}) {
    auto kernel = make_kernel(kOffset, {"offset",
                                        std::nullopt,
                                        std::nullopt,
                                        {ArgSpec::buffer()},
                                        "-DOFFSET=" + std::to_string(offset)});
    auto x = make_buffer<int32_t>(8, 100);
    const KernelArg args[] = {KernelArg::of_buffer(*x)};
    ASSERT_TRUE(run(*kernel, &range, nullptr, args).ok());
    EXPECT_EQ(download<int32_t>(*x), std::vector<int32_t>(8, 100 + offset));
  }
  EXPECT_EQ(cache().stats().compilations, 2u);
}

// A kernel compiled for one signature never serves another: each signature
// is checked against the kernel's parameters when its own entry is compiled.
TEST_F(KernelCacheOnPocl, AnotherSignatureOfTheSameEntryIsCompiledAndCheckedOnItsOwn) {
  auto right = make_kernel(kScale, scale_signature());
  const NdRange range(Dims{32});
  EXPECT_TRUE(scale_twice(*right, &range, nullptr, 32).compiled);
  KernelSignature shorter = scale_signature();
  shorter.args.pop_back();
  auto wrong = make_kernel(kScale, shorter);
  auto x = make_buffer<float>(32, 1.0f);
  const KernelArg args[] = {KernelArg::of_buffer(*x)};
  for (int i = 0; i < 3; ++i) {
    auto r = run(*wrong, &range, nullptr, args);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message(),
              "kernel `scale` has 2 parameters after KAD_CONTEXT, its signature declares 1");
  }
  const KernelCache::Stats s = cache().stats();
  EXPECT_EQ(s.compilations, 1u);
  EXPECT_EQ(s.failures, 1u);             // the wrong signature compiled once...
  EXPECT_EQ(s.remembered_failures, 2u);  // ...and was refused from memory after
  for (float v : download<float>(*x)) EXPECT_EQ(v, 1.0f);
  // The parameters the first compile saw are known for the module and entry.
  auto params = cache().parameters(right->module().digest(), "scale", "");
  ASSERT_TRUE(params.has_value());
  ASSERT_EQ(params->size(), 2u);
  EXPECT_EQ((*params)[0], (KernelParameter{KernelParameter::Space::kGlobal, false, "float*", "x"}));
  EXPECT_EQ((*params)[1], (KernelParameter{KernelParameter::Space::kPrivate, false, "float", "a"}));
}

TEST_F(KernelCacheOnPocl, ASourceThatDoesNotCompileIsRememberedNotRecompiled) {
  auto broken = make_kernel("kernel void scale(KAD_CONTEXT, global float* x, float a) { x[0] = }",
                            scale_signature());
  auto x = make_buffer<float>(8, 1.0f);
  const KernelArg args[] = {KernelArg::of_buffer(*x), KernelArg::of_scalar(2.0f)};
  const NdRange range(Dims{8});
  for (int i = 0; i < 3; ++i) {
    auto r = run(*broken, &range, nullptr, args);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(r.status().message()), ::testing::HasSubstr("did not compile"));
  }
  EXPECT_EQ(cache().stats().failures, 1u);
  EXPECT_EQ(cache().stats().remembered_failures, 2u);
}

}  // namespace
}  // namespace kad
