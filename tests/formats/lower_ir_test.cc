// Toolchain::lower_ir on its own (DESIGN §5): an IR module linked with its
// specialisation becomes valid SPIR-V and complete SPIR bitcode; what it
// cannot lower it refuses with an error that says why.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "core/specialization.h"
#include "core/toolchain.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/formats/ir_modules.h"
#include "tests/support/core_fixtures.h"
#include "tests/support/index_kernel.h"

namespace kad {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

// N-d, linear rank 4, 64-bit, and fully static (no bounds check).
std::vector<Specialization> specs() {
  std::vector<Specialization> out = {testing::Spec(1, false, 32), testing::Spec(4, true, 32),
                                     testing::Spec(2, false, 64)};
  Specialization fixed = testing::Spec(2, false, 32);
  fixed.static_ndrange = NdRange(Dims{16, 8}, Dims{0, -2});
  fixed.static_workgroup = Dims{4, 4};
  fixed.static_blocks = Dims{4, 2};
  fixed.check_bounds = false;
  out.push_back(fixed);
  return out;
}

class LowerIr : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = Toolchain::find();
    ASSERT_TRUE(t.ok()) << t.status();
    toolchain_ = *std::move(t);
    for (ModuleFormat f : {ModuleFormat::kLlvmBitcodeSpir64, ModuleFormat::kSpirv}) {
      auto ir =
          testing::build_linked_ir(testing::kIndexKernel, f, {"-Xclang", "-disable-llvm-passes"});
      ASSERT_TRUE(ir.ok()) << ir.status();
      ir_[f] = *std::move(ir);
    }
  }
  void TearDown() override {
    for (const auto& f : files_) fs::remove(f);
  }
  std::string write(const std::string& name, const std::string& bytes) {
    const std::string path = (fs::temp_directory_path() / (name + std::to_string(getpid()) + "-" +
                                                           std::to_string(files_.size())))
                                 .string();
    std::ofstream(path, std::ios::binary) << bytes;
    files_.push_back(path);
    return path;
  }
  std::optional<Toolchain> toolchain_;
  std::map<ModuleFormat, std::string> ir_;
  std::vector<std::string> files_;
};

TEST_F(LowerIr, LoweredSpirvPassesSpirvValWithNothingLeftToImport) {
  for (const auto& [format, ir] : ir_) {
    for (const Specialization& s : specs()) {
      auto spirv =
          toolchain_->lower_ir(CodeTarget::kSpirv, format, ir, specialization_defines(s), "", "");
      ASSERT_TRUE(spirv.ok()) << spirv.status();
      const std::string path = write("kad-lowered-spv-", *spirv);
      auto val = run_limited({"spirv-val", path}, {});
      ASSERT_TRUE(val.ok()) << val.status();
      EXPECT_EQ(val->exit_code, 0) << module_format_name(format) << ": " << val->output;
      if (!fs::exists("/usr/bin/spirv-dis")) continue;
      auto dis = run_limited({"/usr/bin/spirv-dis", path}, {});
      ASSERT_TRUE(dis.ok()) << dis.status();
      for (absl::string_view line : absl::StrSplit(dis->output, '\n')) {
        EXPECT_FALSE(absl::StrContains(line, "__kad_spec_") && absl::StrContains(line, "Import"))
            << "left unresolved: " << line;
      }
      EXPECT_THAT(dis->output, HasSubstr("OpEntryPoint Kernel"));
    }
  }
}

TEST_F(LowerIr, SpirBitcodeDefinesEverySpecialisationFunction) {
  for (const auto& [format, ir] : ir_) {
    auto bc = toolchain_->lower_ir(CodeTarget::kSpir, format, ir,
                                   specialization_defines(specs().back()), "", "");
    ASSERT_TRUE(bc.ok()) << bc.status();
    const std::string path = write("kad-lowered-bc-", *bc);
    auto undefined = run_limited({testing::llvm_tool("llvm-nm"), "--undefined-only", path}, {});
    ASSERT_TRUE(undefined.ok()) << undefined.status();
    EXPECT_EQ(undefined->exit_code, 0) << undefined->output;
    EXPECT_THAT(undefined->output, Not(HasSubstr("__kad_spec_")));
    auto defined = run_limited({testing::llvm_tool("llvm-nm"), "--defined-only", path}, {});
    ASSERT_TRUE(defined.ok()) << defined.status();
    EXPECT_THAT(defined->output, HasSubstr("T indices"));
    EXPECT_THAT(defined->output, HasSubstr("T __kad_spec_static_extent"));
  }
}

TEST_F(LowerIr, LoweringIrToPtxOrAmdgcnIsUnimplementedAndSaysWhy) {
  for (const auto& [format, ir] : ir_) {
    for (CodeTarget target : {CodeTarget::kPtx, CodeTarget::kAmdgcn}) {
      auto r = toolchain_->lower_ir(target, format, ir, specialization_defines(specs()[0]),
                                    target == CodeTarget::kPtx ? "sm_80" : "gfx90a", "");
      EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented) << r.status();
      const std::string message(r.status().message());
      EXPECT_THAT(message, HasSubstr(std::string(module_format_name(format))));
      EXPECT_THAT(message, HasSubstr(std::string(code_target_name(target))));
      EXPECT_THAT(message, HasSubstr("address spaces"));
    }
  }
}

TEST_F(LowerIr, AModuleWithoutTheLinkedPreludeIsRefused) {
  const std::string program = specialised_source(specs()[0], testing::kIndexKernel);
  for (ModuleFormat f : {ModuleFormat::kLlvmBitcodeSpir64, ModuleFormat::kSpirv}) {
    auto ir = testing::build_plain_ir(program, f);
    ASSERT_TRUE(ir.ok()) << ir.status();
    auto r =
        toolchain_->lower_ir(CodeTarget::kSpir, f, *ir, specialization_defines(specs()[0]), "", "");
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("-DKAD_LINKED_SPECIALIZATION"));
  }
}

TEST_F(LowerIr, ABitcodeModuleForAnotherTargetIsRefused) {
  auto ir = testing::build_linked_ir(testing::kIndexKernel, ModuleFormat::kLlvmBitcodeSpir64,
                                     {"-Xclang", "-disable-llvm-passes", "-target", "spir"});
  ASSERT_TRUE(ir.ok()) << ir.status();
  auto r = toolchain_->lower_ir(CodeTarget::kSpir, ModuleFormat::kLlvmBitcodeSpir64, *ir,
                                specialization_defines(specs()[0]), "", "");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("not spir64"));
}

TEST_F(LowerIr, UnreadableBitcodeIsAnError) {
  std::string junk("BC\xC0\xDE", 4);
  junk.append(60, '\x5a');
  auto r = toolchain_->lower_ir(CodeTarget::kSpirv, ModuleFormat::kLlvmBitcodeSpir64, junk,
                                specialization_defines(specs()[0]), "", "");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("not readable LLVM IR"));
}

}  // namespace
}  // namespace kad
