// check_kernel_metadata() on textual IR: what PoCL's metadata reader asserts
// on is refused with a message naming the kernel and the metadata.
#include "core/ir_checks.h"

#include <string>

#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kad {
namespace {

using ::testing::HasSubstr;

// As clang 15 emits a kernel of three parameters (the context, a buffer, an int).
constexpr char kGood[] = R"(target triple = "spir64"

%struct.kad_context = type { [32 x i64] }

define dso_local spir_kernel void @fill(ptr nocapture noundef readonly byval(%struct.kad_context) align 8 %0, ptr addrspace(1) nocapture noundef writeonly align 4 %out, i32 noundef %v) local_unnamed_addr #0 !kernel_arg_addr_space !3 !kernel_arg_access_qual !4 !kernel_arg_type !5 !kernel_arg_base_type !5 !kernel_arg_type_qual !6 {
entry:
  ret void
}

define spir_func i32 @helper(i32 %a, i32 %b) {
  ret i32 %a
}

!3 = !{i32 0, i32 1, i32 0}
!4 = !{!"none", !"none", !"none"}
!5 = !{!"kad_context", !"int*", !"int"}
!6 = !{!"const", !"", !""}
)";

std::string with(std::initializer_list<std::pair<absl::string_view, absl::string_view>> edits) {
  return absl::StrReplaceAll(kGood, edits);
}

std::string refused(const std::string& ir) {
  const absl::Status s = check_kernel_metadata("LLVM bitcode (spir64)", ir);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  return std::string(s.message());
}

TEST(KernelMetadata, AKernelAsClangEmitsItPasses) {
  EXPECT_TRUE(check_kernel_metadata("x", kGood).ok());
  // Aggregates, vectors and strings with commas do not split parameters or entries.
  EXPECT_TRUE(check_kernel_metadata("x", with({{"i32 noundef %v)", "{ i32, <4 x float> } %v)"},
                                               {"!\"int\"}", "!\"struct{a,b}\"}"}}))
                  .ok());
}

TEST(KernelMetadata, AMissingKindIsRefused) {
  EXPECT_THAT(refused(with({{"!kernel_arg_addr_space !3 ", "!kernel_arg_adds_space !3 "}})),
              HasSubstr("LLVM bitcode (spir64) module: kernel `fill` has no "
                        "!kernel_arg_addr_space metadata"));
  EXPECT_THAT(refused(with({{" !kernel_arg_type_qual !6", ""}})),
              HasSubstr("kernel `fill` has no !kernel_arg_type_qual metadata"));
}

TEST(KernelMetadata, AListOfAnotherLengthIsRefused) {
  EXPECT_THAT(refused(with({{"!3 = !{i32 0, i32 1, i32 0}", "!3 = !{i32 0, i32 1}"}})),
              HasSubstr("kernel `fill` has 3 parameters but its !kernel_arg_addr_space metadata "
                        "has 2 entries"));
  EXPECT_THAT(refused(with({{"!\"kad_context\", !\"int*\", !\"int\"}",
                             "!\"kad_context\", !\"int*\", !\"int\", !\"int\"}"}})),
              HasSubstr("has 3 parameters but its !kernel_arg_type metadata has 4 entries"));
}

TEST(KernelMetadata, EntriesOfTheWrongKindAreRefused) {
  EXPECT_THAT(refused(with({{"!3 = !{i32 0, i32 1, i32 0}", "!3 = !{i32 0, !\"x\", i32 0}"}})),
              HasSubstr("entry 1 of its !kernel_arg_addr_space metadata is `!\"x\"`, not an i32 "
                        "address space"));
  EXPECT_THAT(refused(with({{"!3 = !{i32 0, i32 1, i32 0}", "!3 = !{i32 0, i32 9, i32 0}"}})),
              HasSubstr("entry 1 of its !kernel_arg_addr_space metadata is `i32 9`"));
  EXPECT_THAT(
      refused(with(
          {{"!4 = !{!\"none\", !\"none\", !\"none\"}", "!4 = !{!\"none\", i32 1, !\"none\"}"}})),
      HasSubstr("entry 1 of its !kernel_arg_access_qual metadata is `i32 1`, not a string"));
}

TEST(KernelMetadata, ADanglingReferenceIsRefused) {
  EXPECT_THAT(refused(with({{"!kernel_arg_type !5 ", "!kernel_arg_type !50 "}})),
              HasSubstr("kernel `fill`: its !kernel_arg_type metadata (!50) is missing"));
}

TEST(KernelMetadata, Spir12KernelListIsRefused) {
  EXPECT_THAT(refused(std::string(kGood) + "!opencl.kernels = !{!7}\n!7 = !{ptr @fill}\n"),
              HasSubstr("carries SPIR 1.2's !opencl.kernels list"));
}

TEST(InlineAssembly, ACallToInlineAssemblyIsRefusedNamingTheLine) {
  const std::string ir =
      with({{"entry:\n", "entry:\n  call void asm sideeffect \"syscall\", \"\"()\n"}});
  const absl::Status s = check_no_inline_assembly("OpenCL C", ir);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("line 7 of its LLVM text: inline assembly"));
  const std::string valued =
      with({{"entry:\n",
             "entry:\n  %r = call i64 asm alignstack inteldialect \"mov rax, 39\", \"=r\"()\n"}});
  EXPECT_EQ(check_no_inline_assembly("OpenCL C", valued).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(InlineAssembly, ModuleLevelAssemblyIsRefused) {
  const absl::Status s = check_no_inline_assembly("LLVM bitcode (spir64)",
                                                  std::string("module asm \"nop\"\n") + kGood);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("line 1 of its LLVM text: module-level assembly"));
}

TEST(InlineAssembly, NamesAndStringsThatSpellAsmPass) {
  EXPECT_TRUE(check_no_inline_assembly("OpenCL C", kGood).ok());
  const std::string ir =
      with({{"ret i32 %a", "%asm = add i32 %a, %b\n  ret i32 %asm"},
            {"target triple", "@asm_text = constant [5 x i8] c\"asm \\00\"\ntarget triple"}});
  EXPECT_TRUE(check_no_inline_assembly("OpenCL C", ir).ok()) << ir;
}

}  // namespace
}  // namespace kad
