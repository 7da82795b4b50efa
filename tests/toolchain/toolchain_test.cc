// The GPU toolchain, offline (DESIGN §5, issue "GPU backends"): the conformance
// kernels lowered to PTX, SPIR-V and AMDGCN code objects and checked by the
// tools of each format; and a tool that crashes, hangs or writes too much is
// contained and reported.
#include "core/toolchain.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_format.h"
#include "core/specialization.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/core_fixtures.h"
#include "tests/support/index_kernel.h"

namespace kad {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

class ToolchainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = Toolchain::find();
    ASSERT_TRUE(t.ok()) << t.status();
    toolchain_ = *std::move(t);
  }
  std::string write(const std::string& name, const std::string& bytes) {
    const std::string path =
        (fs::temp_directory_path() / (name + std::to_string(getpid()))).string();
    std::ofstream(path, std::ios::binary) << bytes;
    files_.push_back(path);
    return path;
  }
  void TearDown() override {
    for (const auto& f : files_) fs::remove(f);
  }
  std::optional<Toolchain> toolchain_;
  std::vector<std::string> files_;
};

// The shapes the conformance suite compiles: N-d, linear rank 4, 64-bit, static.
std::vector<Specialization> conformance_specs() {
  std::vector<Specialization> specs = {testing::Spec(1, false, 32), testing::Spec(3, false, 32),
                                       testing::Spec(4, true, 32), testing::Spec(2, false, 64)};
  Specialization fixed = testing::Spec(2, false, 32);
  fixed.static_ndrange = NdRange(Dims{16, 8});
  fixed.static_workgroup = Dims{4, 4};
  fixed.static_blocks = Dims{4, 2};
  fixed.check_bounds = false;
  specs.push_back(fixed);
  return specs;
}

TEST_F(ToolchainTest, ConformanceKernelsLowerToPtxWithTheirEntry) {
  for (const Specialization& s : conformance_specs()) {
    auto ptx = toolchain_->lower(CodeTarget::kPtx, specialised_source(s, testing::kIndexKernel),
                                 "sm_80", "");
    ASSERT_TRUE(ptx.ok()) << ptx.status();
    EXPECT_THAT(*ptx, HasSubstr(".entry indices("));
    EXPECT_THAT(*ptx, HasSubstr(".target sm_80"));
    // Accepted by ptxas for the H200's sm_90 where a CUDA toolkit is installed.
    const char* ptxas = std::getenv("KAD_PTXAS");
    const std::string tool = ptxas ? ptxas : "/usr/local/cuda/bin/ptxas";
    if (!fs::exists(tool)) continue;
    const std::string in = write("kad-ptx-", *ptx);
    auto run = run_limited({tool, "-arch=sm_90", in, "-o", in + ".cubin"}, {});
    files_.push_back(in + ".cubin");
    ASSERT_TRUE(run.ok()) << run.status();
    EXPECT_EQ(run->exit_code, 0) << run->output;
  }
  if (!fs::exists("/usr/local/cuda/bin/ptxas") && !std::getenv("KAD_PTXAS")) {
    std::printf("  ptxas not installed (no CUDA toolkit): PTX checked by llc only\n");
  }
}

TEST_F(ToolchainTest, ConformanceKernelsLowerToValidSpirv) {
  for (const Specialization& s : conformance_specs()) {
    auto spirv =
        toolchain_->lower(CodeTarget::kSpirv, specialised_source(s, testing::kIndexKernel), "", "");
    ASSERT_TRUE(spirv.ok()) << spirv.status();
    ASSERT_GE(spirv->size(), 4u);
    EXPECT_EQ(static_cast<uint8_t>((*spirv)[0]), 0x03) << "SPIR-V magic";
    const std::string path = write("kad-spv-", *spirv);
    auto val = run_limited({"spirv-val", path}, {});
    ASSERT_TRUE(val.ok()) << val.status();
    EXPECT_EQ(val->exit_code, 0) << val->output;
  }
}

TEST_F(ToolchainTest, ConformanceKernelsLinkIntoAmdgcnCodeObjects) {
  for (const Specialization& s : conformance_specs()) {
    auto object = toolchain_->lower(CodeTarget::kAmdgcn,
                                    specialised_source(s, testing::kIndexKernel), "gfx90a", "");
    ASSERT_TRUE(object.ok()) << object.status();
    const std::string path = write("kad-hsaco-", *object);
    auto notes = run_limited({"/usr/lib/llvm-15/bin/llvm-readobj", "--notes", path}, {});
    ASSERT_TRUE(notes.ok()) << notes.status();
    EXPECT_EQ(notes->exit_code, 0) << notes->output;
    EXPECT_THAT(notes->output, HasSubstr(".name:           indices"));
    EXPECT_THAT(notes->output, HasSubstr(".symbol:         indices.kd"));
    EXPECT_THAT(notes->output, HasSubstr("amdgcn-amd-amdhsa--gfx90a"));
    EXPECT_THAT(notes->output, HasSubstr(".kernarg_segment_size"));
  }
}

TEST_F(ToolchainTest, ACompileErrorReturnsTheCompilersLog) {
  auto r =
      toolchain_->lower(CodeTarget::kPtx,
                        specialised_source(testing::Spec(1, false, 32),
                                           "kernel void k(KAD_CONTEXT) { undefined_thing(); }"),
                        "sm_80", "");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("undefined_thing"));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("failed lowering to PTX"));
}

// A source that check_opencl_source would refuse, given to the compiler
// directly: the sandbox is the second wall, and the file's bytes never reach
// the compiler's log (which goes back to the client).
TEST_F(ToolchainTest, AnIncludedHostFileIsUnreadableToTheCompiler) {
  if (!tool_sandbox_support().ok()) GTEST_SKIP() << tool_sandbox_support();
  std::string passwd;
  std::getline(std::ifstream("/etc/passwd"), passwd);
  ASSERT_FALSE(passwd.empty());
  for (const CodeTarget target : {CodeTarget::kSpir, CodeTarget::kPtx}) {
    auto r = toolchain_->lower(
        target,
        specialised_source(testing::Spec(1, false, 32),
                           "#include \"/etc/passwd\"\nkernel void k(KAD_CONTEXT) {}\n"),
        "sm_80", "");
    ASSERT_FALSE(r.ok()) << code_target_name(target);
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("/etc/passwd"));
    EXPECT_THAT(std::string(r.status().message()), Not(HasSubstr(passwd)));
  }
}

TEST(ToolProcess, ASandboxedToolReadsAndWritesOnlyWhatItIsGiven) {
  if (!tool_sandbox_support().ok()) GTEST_SKIP() << tool_sandbox_support();
  const fs::path work = fs::temp_directory_path() / ("kad-sandbox-" + std::to_string(getpid()));
  fs::create_directories(work);
  const ToolSandbox sandbox{{"/usr", "/lib", "/lib64", "/bin"}, {work.string()}};
  auto unsandboxed = run_limited({"/bin/cat", "/etc/hostname"}, {});
  ASSERT_TRUE(unsandboxed.ok());
  EXPECT_EQ(unsandboxed->exit_code, 0);
  auto read = run_limited({"/bin/cat", "/etc/hostname"}, {}, &sandbox);
  ASSERT_TRUE(read.ok());
  EXPECT_NE(read->exit_code, 0);
  EXPECT_THAT(read->output, HasSubstr("Permission denied"));
  auto proc = run_limited({"/bin/cat", "/proc/self/environ"}, {}, &sandbox);
  ASSERT_TRUE(proc.ok());
  EXPECT_NE(proc->exit_code, 0);
  const std::string outside = "/tmp/kad-sandbox-outside-" + std::to_string(getpid());
  auto escape = run_limited({"/bin/sh", "-c", "echo x > " + outside}, {}, &sandbox);
  ASSERT_TRUE(escape.ok());
  EXPECT_NE(escape->exit_code, 0);
  EXPECT_FALSE(fs::exists(outside));
  auto inside = run_limited({"/bin/sh", "-c", "echo x > " + (work / "out").string()}, {}, &sandbox);
  ASSERT_TRUE(inside.ok());
  EXPECT_EQ(inside->exit_code, 0) << inside->output;
  EXPECT_TRUE(fs::exists(work / "out"));
  fs::remove_all(work);
}

TEST(ToolProcess, AHangingToolIsStoppedAtItsTimeLimit) {
  ToolchainLimits limits;
  limits.seconds = 1;
  auto r = run_limited({"sleep", "30"}, limits);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("did not finish within 1 s"));
}

TEST(ToolProcess, ACrashingToolIsReportedWithItsSignal) {
  auto r = run_limited({"sh", "-c", "kill -SEGV $$"}, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->signal, SIGSEGV);
}

TEST(ToolProcess, HugeOutputIsRefused) {
  ToolchainLimits limits;
  limits.output_bytes = 1 << 20;
  const std::string out = "/tmp/kad-huge-" + std::to_string(getpid());
  auto r = run_limited({"dd", "if=/dev/zero", "of=" + out, "bs=1M", "count=10"}, limits);
  std::filesystem::remove(out);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(ToolProcess, MemoryIsLimited) {
  ToolchainLimits limits;
  limits.memory_bytes = 64 << 20;
  auto r = run_limited({"/usr/bin/python3", "-c", "x = bytearray(512 << 20)"}, limits);
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r->exit_code, 0);
  EXPECT_THAT(r->output, HasSubstr("MemoryError"));
}

}  // namespace
}  // namespace kad
