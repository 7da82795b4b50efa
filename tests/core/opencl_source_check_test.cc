// check_opencl_source: a client's OpenCL C may not make a compiler reach any
// other file, however the reference is spelled; ordinary kernels pass.
#include "core/opencl_source_check.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kad {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string refusal(const std::string& source) {
  const absl::Status s = check_opencl_source(source);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << source;
  return std::string(s.message());
}

TEST(OpenClSourceCheck, OrdinaryKernelsPass) {
  const char* kernels[] = {
      "kernel void f(KAD_CONTEXT, global int* o) { if (kad_active()) o[0] = 1; }",
      "#define N 4\n#if N > 2\n#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n#endif\n"
      "kernel void f(KAD_CONTEXT, global double* o) {\n#pragma unroll 4\n"
      "  for (int i = 0; i < N; ++i) o[i] = i; }\n",
      "#define STR(x) #x\n#define CAT(a, b) a##b\nconstant char s[] = STR(include);\n",
      "// #include \"/etc/passwd\" in a comment\n/* #include <x> */ kernel void f() {}\n",
      "constant char s[] = \"#include \\\"/etc/passwd\\\" in a string\";\n",
      "#pragma clang loop unroll(enable)\n#pragma clang diagnostic ignored \"-Wunused\"\n",
      "int what(int a) { return a ? 1 : 2; }  // ? ? = not a trigraph\n",
  };
  for (const char* k : kernels) EXPECT_TRUE(check_opencl_source(k).ok()) << k;
}

TEST(OpenClSourceCheck, IncludeOfAnAbsolutePathIsRefusedNamingTheLine) {
  const std::string m = refusal("kernel void f() {}\n\n#include \"/etc/passwd\"\n");
  EXPECT_THAT(m, HasSubstr("line 3"));
  EXPECT_THAT(m, HasSubstr("`#include`"));
  EXPECT_THAT(m, Not(HasSubstr("root")));
}

TEST(OpenClSourceCheck, EveryDirectiveThatReadsAFileIsRefusedHoweverSpelled) {
  const char* sources[] = {
      "#define P \"/etc/passwd\"\n#include P\n",
      "#include <stdio.h>\n",
      "  #  include_next <x.h>\n",
      "#import \"/etc/passwd\"\n",
      "#embed \"/etc/passwd\"\n",
      "%:include \"/etc/passwd\"\n",
      "/* a comment */ # /* another */ include \"/etc/passwd\"\n",
      "#inc\\\nlude \"/etc/passwd\"\n",
      "#\\\ninclude \"/etc/passwd\"\n",
      "#if __has_include(\"/etc/shadow\")\n#endif\n",
      "#if defined(__has_include_next)\n#endif\n",
      "#if __has_embed(\"/etc/passwd\")\n#endif\n",
      "_Pragma(\"GCC dependency \\\"/etc/passwd\\\"\")\n",
      "#define D(x) _Pragma(#x)\n",
      "#pragma GCC dependency \"/etc/passwd\"\n",
      "#pragma clang module import foo\n",
      "#pragma push_macro(\"X\")\n",
      "?\?=include \"/etc/passwd\"\n",
      "#define X ?\?/\ninclude\n",
  };
  for (const char* s : sources) EXPECT_FALSE(check_opencl_source(s).ok()) << s;
}

TEST(OpenClSourceCheck, TheLineNamedIsTheClientsOwnAcrossSplices) {
  EXPECT_THAT(refusal("#define LONG a \\\n  b \\\n  c\nint x;\n#include <x.h>\n"),
              HasSubstr("line 5: `#include`"));
}

TEST(OpenClSourceCheck, ARefusedPragmaIsNamed) {
  EXPECT_THAT(refusal("#pragma GCC dependency \"/etc/passwd\"\n"),
              HasSubstr("`#pragma GCC dependency`"));
}

TEST(OpenClSourceCheck, ATrigraphIsRefusedBeforeAnythingElse) {
  EXPECT_THAT(refusal("kernel void f() {}\n?\?=include \"/etc/passwd\"\n"),
              HasSubstr("line 2: the trigraph `?\?=`"));
}

TEST(OpenClSourceCheck, InlineAssemblyIsRefusedInEverySpellingNamingTheLine) {
  for (const char* keyword : {"asm", "__asm", "__asm__"}) {
    const std::string m = refusal(std::string("kernel void f() {\n  ") + keyword +
                                  " volatile(\"movl $39, %eax; syscall\");\n}\n");
    EXPECT_THAT(m, HasSubstr("line 2")) << keyword;
    EXPECT_THAT(m, HasSubstr(std::string("inline assembly (`") + keyword + "`)")) << keyword;
  }
  // Only the keyword: names that contain it and the word in text pass.
  EXPECT_TRUE(check_opencl_source("int asm_like(int x) { return x; }  // asm\n"
                                  "constant char s[] = \"asm\";\n")
                  .ok());
}

}  // namespace
}  // namespace kad
