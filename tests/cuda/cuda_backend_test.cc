// The CUDA backend on a machine without an NVIDIA GPU (DESIGN §1, issue "GPU
// backends"): it reports one clear line and no devices, with the real
// libcuda where one is installed (the toolkit's stub, which has no driver
// behind it); its pure rules — tuning from the occupancy API, the PTX target,
// the static block size written into PTX — and the PTX it loads, checked by
// ptxas for the H200's sm_90 where a CUDA toolkit is installed.
#include "backends/cuda/cuda_backend.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_join.h"
#include "backends/cuda/cuda_launch_configuration.h"
#include "backends/cuda/cuda_status.h"
#include "core/specialization.h"
#include "core/toolchain.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/index_kernel.h"

namespace kad::cuda {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::SizeIs;

TEST(CudaDiscovery, MissingDriverLibraryIsOneLineAndNoDevices) {
  BackendDiscovery found = discover({.library = "libcuda-not-installed.so.1", .device = {}});
  EXPECT_TRUE(found.devices.empty());
  ASSERT_THAT(found.log, SizeIs(1));
  EXPECT_THAT(found.log[0], HasSubstr("cuda: disabled, no NVIDIA driver"));
  EXPECT_THAT(found.log[0], HasSubstr("libcuda-not-installed.so.1"));
}

TEST(CudaDiscovery, ThisMachineReportsOneLine) {
  BackendDiscovery found = discover();
  if (!found.devices.empty()) GTEST_SKIP() << "a CUDA device is present: " << found.log[0];
  ASSERT_THAT(found.log, SizeIs(1)) << absl::StrJoin(found.log, "\n");
  EXPECT_THAT(found.log[0], HasSubstr("cuda: disabled"));
}

// The toolkit's stub exports the whole API but has no driver behind it: cuInit
// fails, and the error is named by the library itself (cuGetErrorName).
TEST(CudaDiscovery, StubDriverFailsCuInitWithTheDriversOwnErrorName) {
  std::string stub;
  for (const char* path :
       {"/usr/local/cuda/lib64/stubs/libcuda.so", "/usr/local/cuda/lib/stubs/libcuda.so",
        "/usr/local/cuda/targets/x86_64-linux/lib/stubs/libcuda.so"}) {
    if (fs::exists(path)) stub = path;
  }
  if (stub.empty()) GTEST_SKIP() << "no CUDA toolkit stub libcuda.so under /usr/local/cuda";
  BackendDiscovery found = discover({.library = stub.c_str(), .device = {}});
  EXPECT_TRUE(found.devices.empty());
  ASSERT_THAT(found.log, SizeIs(1));
  EXPECT_THAT(found.log[0], HasSubstr("cuda: disabled, cuInit failed: CUDA_ERROR_STUB_LIBRARY"));
}

TEST(CudaStatus, ErrorsMapToStatusCodesAtTheEdge) {
  EXPECT_EQ(status_code_for(CUDA_SUCCESS), absl::StatusCode::kOk);
  EXPECT_EQ(status_code_for(2), absl::StatusCode::kResourceExhausted);  // out of memory
  EXPECT_EQ(status_code_for(218), absl::StatusCode::kInvalidArgument);  // invalid PTX
  EXPECT_EQ(status_code_for(500), absl::StatusCode::kNotFound);         // no such kernel
  EXPECT_EQ(status_code_for(CUDA_ERROR_NO_DEVICE), absl::StatusCode::kUnavailable);
  EXPECT_EQ(status_code_for(700), absl::StatusCode::kAborted);  // illegal address
  EXPECT_EQ(status_code_for(999), absl::StatusCode::kInternal);
}

TEST(CudaLaunchConfiguration, TakesTheOccupancyBlockWithinTheLimits) {
  EXPECT_EQ(occupancy_threads(1 << 20, 1024, 768, 264, false), 768u);
  EXPECT_EQ(occupancy_threads(100, 1024, 768, 264, false), 100u);  // no more than the items
  EXPECT_EQ(occupancy_threads(1 << 20, 256, 768, 264, false), 256u);
  EXPECT_EQ(occupancy_threads(0, 1024, 768, 264, false), 1u);
  EXPECT_EQ(occupancy_threads(1 << 20, 1024, 0, 0, false), 1u);  // no suggestion: still >= 1
}

// prefer_blocks (KernelAbstractions): blocks = max(cld(n, threads), min_grid);
// threads = cld(n, blocks).
TEST(CudaLaunchConfiguration, PreferBlocksTradesThreadsForBlocksToFillTheDevice) {
  // 10 000 items at 1024 threads would be 10 blocks; 132 SMs want 264.
  EXPECT_EQ(occupancy_threads(10000, 1024, 1024, 264, true), 38u);  // cld(10000, 264)
  // Enough items: the occupancy block stands.
  EXPECT_EQ(occupancy_threads(1 << 20, 1024, 1024, 264, true), 1024u);
  EXPECT_EQ(occupancy_threads(5, 1024, 1024, 264, true), 1u);
}

TEST(CudaPtxTarget, NewestTargetLlvmKnowsThatTheDeviceRuns) {
  EXPECT_EQ(*ptx_target_for(9, 0), "sm_80");  // H100, H200: JIT from sm_80 PTX
  EXPECT_EQ(*ptx_target_for(8, 6), "sm_80");
  EXPECT_EQ(*ptx_target_for(7, 5), "sm_75");
  EXPECT_EQ(*ptx_target_for(7, 0), "sm_70");
  absl::StatusOr<std::string> old = ptx_target_for(3, 0);
  EXPECT_EQ(old.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(old.status().message(), HasSubstr("compute capability 3.0"));
}

constexpr char kTwoEntries[] =
    ".version 7.0\n.target sm_80\n.address_size 64\n"
    ".visible .entry indices2(\n\t.param .u64 p0\n)\n{\n\tret;\n}\n"
    ".visible .entry indices(\n\t.param .u64 p0\n)\n{\n\tret;\n}\n";

TEST(CudaMaxThreads, WritesMaxntidIntoTheNamedEntryOnly) {
  absl::StatusOr<std::string> ptx = with_max_threads(kTwoEntries, "indices", {16, 4, 1});
  ASSERT_TRUE(ptx.ok()) << ptx.status();
  EXPECT_THAT(*ptx, HasSubstr(".entry indices(\n\t.param .u64 p0\n)\n.maxntid 16, 4, 1\n{"));
  EXPECT_THAT(*ptx, HasSubstr(".entry indices2(\n\t.param .u64 p0\n)\n{"));
  // Written once: a second pass leaves it as it is.
  EXPECT_EQ(*with_max_threads(*ptx, "indices", {16, 4, 1}), *ptx);
}

TEST(CudaMaxThreads, MissingEntryIsNamed) {
  absl::StatusOr<std::string> ptx = with_max_threads(kTwoEntries, "saxpy", {64, 1, 1});
  EXPECT_EQ(ptx.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(ptx.status().message(), HasSubstr("saxpy"));
}

TEST(CudaParameterCount, CountsTheNamedEntrysParameters) {
  EXPECT_EQ(*ptx_parameter_count(kTwoEntries, "indices"), 1u);
  constexpr char kThree[] =
      ".visible .entry k(\n\t.param .align 8 .b8 k_param_0[256],\n\t.param .u64 k_param_1,\n"
      "\t.param .f32 k_param_2\n)\n{\n\tret;\n}\n"
      ".visible .entry none()\n{\n\tret;\n}\n";
  EXPECT_EQ(*ptx_parameter_count(kThree, "k"), 3u);
  EXPECT_EQ(*ptx_parameter_count(kThree, "none"), 0u);
  EXPECT_EQ(ptx_parameter_count(kThree, "saxpy").status().code(), absl::StatusCode::kNotFound);
}

// What the backend compares a signature with: the lowered kernel's PTX has
// one parameter per OpenCL parameter, KAD_CONTEXT first.
TEST(CudaParameterCount, ALoweredKernelHasOneParameterPerOpenClParameter) {
  absl::StatusOr<Toolchain> toolchain = Toolchain::find();
  ASSERT_TRUE(toolchain.ok()) << toolchain.status();
  Specialization spec;
  spec.choice.rank = 1;
  absl::StatusOr<std::string> ptx = toolchain->lower(
      CodeTarget::kPtx,
      specialised_source(spec,
                         "kernel void mixk(KAD_CONTEXT, global long* out, ulong a, short b, "
                         "local float* t, double d) { if (kad_active()) out[0] = a + b + d; }"),
      "sm_80", "");
  ASSERT_TRUE(ptx.ok()) << ptx.status();
  EXPECT_EQ(*ptx_parameter_count(*ptx, "mixk"), 6u);
}

constexpr char kLocalParam[] =
    ".version 7.0\n.target sm_80\n.address_size 64\n\n"
    ".visible .entry tiles(\n\t.param .u64 tiles_param_0,\n\t.param .u64 tiles_param_1\n)\n{\n"
    "\t.reg .b64 \t%rd<3>;\n\tld.param.u64 \t%rd1, [tiles_param_1];\n"
    "\tst.shared.u32 \t[%rd1], 0;\n\tret;\n}\n";

TEST(CudaDynamicLocal, LocalParameterBecomesAnOffsetIntoTheDynamicWindow) {
  const int params[] = {1};
  absl::StatusOr<std::string> ptx = with_dynamic_local(kLocalParam, "tiles", params);
  ASSERT_TRUE(ptx.ok()) << ptx.status();
  EXPECT_THAT(*ptx, HasSubstr(".extern .shared .align 16 .b8 __kad_dynamic_local[];\n"
                              ".visible .entry tiles("));
  EXPECT_THAT(*ptx, HasSubstr("mov.u64 \t%kad_local_base, __kad_dynamic_local;"));
  EXPECT_THAT(*ptx, HasSubstr("ld.param.u64 \t%rd1, [tiles_param_1];\n"
                              "\tadd.u64 \t%rd1, %rd1, %kad_local_base;"));
}

TEST(CudaDynamicLocal, UseOtherThanALoadIsRefusedByName) {
  std::string odd = kLocalParam;
  odd.replace(odd.find("ld.param.u64"), 12, "mov.u64");
  const int params[] = {1};
  absl::StatusOr<std::string> ptx = with_dynamic_local(odd, "tiles", params);
  EXPECT_EQ(ptx.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ptx.status().message(), HasSubstr("local-memory parameter 1"));
}

// ptxas for sm_90, where a CUDA toolkit is installed ("" when it ran fine).
std::string assemble_for_sm90(const std::string& ptx, const std::string& entry) {
  const char* override_ptxas = std::getenv("KAD_PTXAS");
  const std::string ptxas = override_ptxas ? override_ptxas : "/usr/local/cuda/bin/ptxas";
  const fs::path dir = fs::temp_directory_path() / ("kad-ptx-" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "kernel.ptx") << ptx;
  absl::StatusOr<ToolRun> run =
      run_limited({ptxas, "-arch=sm_90", "-v", (dir / "kernel.ptx").string(), "-o",
                   (dir / "kernel.cubin").string()},
                  ToolchainLimits{});
  fs::remove_all(dir);
  if (!run.ok()) return std::string(run.status().message());
  if (run->exit_code != 0) return run->output;
  if (run->output.find("Compiling entry function '" + entry + "' for 'sm_90'") ==
      std::string::npos) {
    return "ptxas did not compile the entry: " + run->output;
  }
  return "";
}

bool have_ptxas() {
  const char* override_ptxas = std::getenv("KAD_PTXAS");
  return fs::exists(override_ptxas ? override_ptxas : "/usr/local/cuda/bin/ptxas");
}

// The barrier conformance kernel (a local-memory argument) as the backend
// rewrites it is valid PTX for the H200.
TEST(CudaPtx, LocalMemoryKernelWithDynamicWindowAssemblesForSm90) {
  if (!have_ptxas()) GTEST_SKIP() << "no ptxas: no CUDA toolkit installed";
  absl::StatusOr<Toolchain> toolchain = Toolchain::find();
  ASSERT_TRUE(toolchain.ok()) << toolchain.status();
  Specialization spec;
  spec.choice.rank = 1;
  constexpr char kNeighbours[] = R"(
kernel void neighbours(KAD_CONTEXT, global const int* restrict in, global int* out, local int* tile) {
  const long l = kad_local_index(0);
  tile[l] = kad_active() ? in[kad_global_index(0)] : 0;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (kad_active()) out[kad_global_index(0)] = tile[l] + (l + 1 < kad_groupsize(0) ? tile[l + 1] : 0);
}
)";
  absl::StatusOr<std::string> ptx =
      toolchain->lower(CodeTarget::kPtx, specialised_source(spec, kNeighbours), "sm_80", "");
  ASSERT_TRUE(ptx.ok()) << ptx.status();
  const int params[] = {3};
  absl::StatusOr<std::string> windowed = with_dynamic_local(*ptx, "neighbours", params);
  ASSERT_TRUE(windowed.ok()) << windowed.status();
  EXPECT_THAT(*windowed, HasSubstr("%kad_local_base;"));
  EXPECT_EQ(assemble_for_sm90(*windowed, "neighbours"), "");
}

// The conformance kernel with a static workgroup size, lowered as the backend
// lowers it and bounded by .maxntid, is valid PTX for the H200.
TEST(CudaPtx, StaticWorkgroupKernelWithMaxntidAssemblesForSm90) {
  if (!have_ptxas()) GTEST_SKIP() << "no ptxas: no CUDA toolkit installed";
  absl::StatusOr<Toolchain> toolchain = Toolchain::find();
  ASSERT_TRUE(toolchain.ok()) << toolchain.status();
  Specialization spec;
  spec.choice.rank = 2;
  spec.static_ndrange = NdRange(Dims{64, 32});
  spec.static_workgroup = Dims{16, 4};
  spec.static_blocks = Dims{4, 8};
  spec.check_bounds = false;
  absl::StatusOr<std::string> ptx = toolchain->lower(
      CodeTarget::kPtx, specialised_source(spec, testing::kIndexKernel), "sm_80", "");
  ASSERT_TRUE(ptx.ok()) << ptx.status();
  absl::StatusOr<std::string> bounded = with_max_threads(*ptx, "indices", {16, 4, 1});
  ASSERT_TRUE(bounded.ok()) << bounded.status();
  EXPECT_EQ(assemble_for_sm90(*bounded, "indices"), "");
}

}  // namespace
}  // namespace kad::cuda
