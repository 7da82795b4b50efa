// Lowering through the on-disk cache (DESIGN §5): code lowered where the
// toolchain is installed serves a machine without it (a GPU node), keys name
// the code target and toolchain but not the device or driver, native device
// code passes through, and a miss without a toolchain is a clear error.
#include "core/kernel_lowering.h"

#include <unistd.h>

#include <filesystem>

#include "core/kernel_signature.h"
#include "core/specialization.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/index_kernel.h"

namespace kad {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class KernelLoweringTest : public ::testing::Test {
 protected:
  void SetUp() override {
    folder_ = fs::temp_directory_path() /
              ("kad-lowering-" + std::to_string(getpid()) + "-" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(folder_);
    auto m = Module::create(ModuleFormat::kOpenClC, testing::kIndexKernel);
    ASSERT_TRUE(m.ok()) << m.status();
    module_ = *m;
    signature_.entry = "indices";
    spec_.choice.rank = 2;
    key_.module_digest = module_->digest();
    key_.entry = "indices";
    key_.device_id = "cuda:0";
    key_.spec = spec_;
    key_.toolchain_version = "driver 13.0";
  }
  void TearDown() override { fs::remove_all(folder_); }

  CompileRequest request(const SpecializationKey& key) const {
    return CompileRequest{
        *module_, signature_, spec_, key, specialised_source(spec_, module_->bytes()), ""};
  }

  fs::path folder_;
  std::shared_ptr<const Module> module_;
  KernelSignature signature_;
  Specialization spec_;
  SpecializationKey key_;
};

TEST_F(KernelLoweringTest, CodeLoweredWithTheToolchainServesAMachineWithout) {
  CodeCache build_machine_cache(folder_.string(), 1 << 26);
  KernelLowering build_machine(Toolchain::find(), &build_machine_cache);
  ASSERT_TRUE(build_machine.toolchain_status().ok()) << build_machine.toolchain_status();
  absl::StatusOr<std::string> ptx = build_machine.lower(request(key_), CodeTarget::kPtx, "sm_80");
  ASSERT_TRUE(ptx.ok()) << ptx.status();
  EXPECT_THAT(*ptx, HasSubstr(".entry indices("));
  EXPECT_EQ(build_machine_cache.stats().stores, 1u);

  // The GPU node: no toolchain, another device and driver, the same cache folder.
  CodeCache gpu_cache(folder_.string(), 1 << 26);
  KernelLowering gpu_node(absl::NotFoundError("clang is missing"), &gpu_cache);
  EXPECT_EQ(gpu_node.version(), built_toolchain_version());
  SpecializationKey on_gpu = key_;
  on_gpu.device_id = "cuda:3";
  on_gpu.toolchain_version = "driver 12.8";
  absl::StatusOr<std::string> served = gpu_node.lower(request(on_gpu), CodeTarget::kPtx, "sm_80");
  ASSERT_TRUE(served.ok()) << served.status();
  EXPECT_EQ(*served, *ptx);
  EXPECT_EQ(gpu_cache.stats().hits, 1u);
}

TEST_F(KernelLoweringTest, MissWithoutAToolchainNamesTheCacheAndTheReason) {
  CodeCache cache(folder_.string(), 1 << 26);
  KernelLowering no_toolchain(absl::NotFoundError("clang is missing"), &cache);
  absl::StatusOr<std::string> code = no_toolchain.lower(request(key_), CodeTarget::kPtx, "sm_80");
  EXPECT_EQ(code.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(code.status().message(), HasSubstr("kernel `indices`"));
  EXPECT_THAT(code.status().message(), HasSubstr(folder_.string()));
  EXPECT_THAT(code.status().message(), HasSubstr("clang is missing"));
}

TEST_F(KernelLoweringTest, KeyNamesTargetAndSpecialisationNotDeviceOrDriver) {
  CodeCache cache("", 0);
  KernelLowering lowering(absl::NotFoundError("none"), &cache);
  const std::string base = lowering.code_key(request(key_), CodeTarget::kPtx, "sm_80");
  SpecializationKey other_device = key_;
  other_device.device_id = "cuda:1";
  other_device.toolchain_version = "driver 99";
  EXPECT_EQ(lowering.code_key(request(other_device), CodeTarget::kPtx, "sm_80"), base);
  EXPECT_NE(lowering.code_key(request(key_), CodeTarget::kPtx, "sm_75"), base);
  EXPECT_NE(lowering.code_key(request(key_), CodeTarget::kSpirv, ""), base);
  SpecializationKey other_spec = key_;
  other_spec.spec.choice.index_bits = 64;
  EXPECT_NE(lowering.code_key(request(other_spec), CodeTarget::kPtx, "sm_80"), base);
  SpecializationKey other_options = key_;
  other_options.compiler_options = "-DFAST=1";
  EXPECT_NE(lowering.code_key(request(other_options), CodeTarget::kPtx, "sm_80"), base);
}

TEST_F(KernelLoweringTest, OpenClCompileErrorCarriesTheCompilersLogAndIsNotCached) {
  CodeCache cache(folder_.string(), 1 << 26);
  KernelLowering lowering(Toolchain::find(), &cache);
  auto broken = Module::create(ModuleFormat::kOpenClC, "__kernel void indices(KAD_CONTEXT) { x; }");
  ASSERT_TRUE(broken.ok());
  SpecializationKey key = key_;
  key.module_digest = (*broken)->digest();
  CompileRequest r{**broken, signature_, spec_, key, specialised_source(spec_, (*broken)->bytes()),
                   ""};
  absl::StatusOr<std::string> code = lowering.lower(r, CodeTarget::kPtx, "sm_80");
  EXPECT_EQ(code.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(code.status().message(), HasSubstr("use of undeclared identifier 'x'"));
  EXPECT_EQ(cache.stats().stores, 0u);
}

TEST(LoweringTargets, ParseTheKadPrelowerList) {
  absl::StatusOr<std::vector<LoweringTarget>> t =
      parse_lowering_targets("ptx:sm_80, spirv,amdgcn:gfx90a");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->size(), 3u);
  EXPECT_EQ((*t)[0].target, CodeTarget::kPtx);
  EXPECT_EQ((*t)[0].cpu, "sm_80");
  EXPECT_EQ((*t)[1].target, CodeTarget::kSpirv);
  EXPECT_EQ((*t)[2].cpu, "gfx90a");
  EXPECT_THAT(parse_lowering_targets("ptx").status().message(), HasSubstr("needs an architecture"));
  EXPECT_THAT(parse_lowering_targets("cuda:sm_80").status().message(),
              HasSubstr("unknown code target `cuda`"));
}

// A compile on this machine (PoCL, whose backend adds its own options) also
// fills the cache for a PTX device that adds none: the GPU node's key.
TEST_F(KernelLoweringTest, PrelowerStoresWhatAGpuNodeWillLookUp) {
  CodeCache cache(folder_.string(), 1 << 26);
  KernelLowering build_machine(Toolchain::find(), &cache, {{CodeTarget::kPtx, "sm_80"}});
  SpecializationKey on_pocl = key_;
  on_pocl.device_id = "opencl:pocl:0";
  on_pocl.compiler_options = "-cl-some-pocl-option";
  CompileRequest pocl_request{*module_,
                              signature_,
                              spec_,
                              on_pocl,
                              specialised_source(spec_, module_->bytes()),
                              "-cl-some-pocl-option"};
  EXPECT_EQ(build_machine.prelower(pocl_request), 1);

  KernelLowering gpu_node(absl::NotFoundError("clang is missing"), &cache);
  absl::StatusOr<std::string> served = gpu_node.lower(request(key_), CodeTarget::kPtx, "sm_80");
  ASSERT_TRUE(served.ok()) << served.status();
  EXPECT_THAT(*served, HasSubstr(".entry indices("));
}

}  // namespace
}  // namespace kad
