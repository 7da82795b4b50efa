// Build options are client input: checked_build_options() lets through only
// an allow-list, in one canonical spelling, and names what it refuses.
#include "core/build_options.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kad {
namespace {

using ::testing::HasSubstr;

std::string refused(absl::string_view options) {
  absl::StatusOr<std::string> r = checked_build_options("k", options);
  EXPECT_FALSE(r.ok()) << options << " was accepted as `" << *r << "`";
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(r.status().message());
}

TEST(BuildOptions, AllowedOptionsComeBackInOneSpelling) {
  EXPECT_EQ(*checked_build_options("k", ""), "");
  EXPECT_EQ(*checked_build_options("k", "  \t\n "), "");
  EXPECT_EQ(*checked_build_options("k", "-D N=3  -DM\t-D V=1.5e+3 -cl-mad-enable -w -Werror"),
            "-DN=3 -DM -DV=1.5e+3 -cl-mad-enable -w -Werror");
  EXPECT_EQ(
      *checked_build_options("k", "-cl-fast-relaxed-math -cl-fp32-correctly-rounded-divide-sqrt"),
      "-cl-fast-relaxed-math -cl-fp32-correctly-rounded-divide-sqrt");
  EXPECT_EQ(*checked_build_options("k", "-DNEG=-1 -D_x9="), "-DNEG=-1 -D_x9=");
}

TEST(BuildOptions, ADefineWithoutAMacroNameIsRefused) {
  EXPECT_THAT(refused("-D"), HasSubstr("kernel `k`: build option `-D` has no macro name after it"));
  EXPECT_THAT(refused("-cl-mad-enable -D"), HasSubstr("`-D` has no macro name"));
  EXPECT_THAT(refused("-D=1"), HasSubstr("build option `-D=1` does not name a macro"));
  EXPECT_THAT(refused("-D 9x"), HasSubstr("build option `-D9x` does not name a macro"));
  EXPECT_THAT(refused("-DA-B"), HasSubstr("build option `-DA-B` does not name a macro"));
}

TEST(BuildOptions, OptionsThatReachHostFilesOrLoadCodeAreRefused) {
  for (const char* option : {"-I/etc", "-I", "-include", "@/etc/passwd", "-Xclang", "-load",
                             "-fplugin=/tmp/x.so", "-o", "-MF", "--config", "-cl-std=CL2.0", "-x",
                             "-U", "-UX", "-save-temps", "-cl-kernel-arg-info"}) {
    EXPECT_THAT(refused(absl::StrCat("-DOK ", option, " /tmp/file")),
                HasSubstr(absl::StrCat("build option `", option, "` is not allowed")))
        << option;
  }
}

TEST(BuildOptions, MacrosOfThePreludeAndTheCompilerAreReserved) {
  EXPECT_THAT(refused("-DKAD_RANK=3"), HasSubstr("names macro `KAD_RANK`, which is reserved"));
  EXPECT_THAT(refused("-D KAD_LINKED_SPECIALIZATION"),
              HasSubstr("macro `KAD_LINKED_SPECIALIZATION`"));
  EXPECT_THAT(refused("-Dkad_active=1"), HasSubstr("macro `kad_active`"));
  EXPECT_THAT(refused("-D__OPENCL_VERSION__=200"), HasSubstr("macro `__OPENCL_VERSION__`"));
}

TEST(BuildOptions, ValuesHoldOnlyPlainCharacters) {
  EXPECT_THAT(refused("-DX=\"/etc/passwd\""),
              HasSubstr("the value `\"/etc/passwd\"` may hold only"));
  EXPECT_THAT(refused("-DX=a;b"), HasSubstr("the value `a;b`"));
  EXPECT_THAT(refused("-DX=$(id)"), HasSubstr("the value `$(id)`"));
  EXPECT_THAT(refused("-DX='1'"), HasSubstr("the value `'1'`"));
}

TEST(BuildOptions, TooManyBytesAreRefusedBeforeParsing) {
  const std::string huge(kMaxBuildOptionsBytes + 1, 'w');
  EXPECT_THAT(refused(huge), HasSubstr("build options of 4097 bytes exceed the maximum of 4096"));
  std::string many;
  while (many.size() + 3 <= kMaxBuildOptionsBytes) many += "-w ";
  EXPECT_TRUE(checked_build_options("k", many).ok());
}

}  // namespace
}  // namespace kad
