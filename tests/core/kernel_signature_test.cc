// A signature against a compiled kernel's parameters (check_signature), and
// its text in the specialisation key (signature_text).
#include "core/kernel_signature.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kad {
namespace {

using Space = KernelParameter::Space;

KernelParameter param(Space space, const char* type, const char* name, bool is_const = false) {
  return {space, is_const, type, name};
}

const std::vector<KernelParameter> kMixed = {
    param(Space::kGlobal, "long*", "out"), param(Space::kGlobal, "float*", "in", true),
    param(Space::kPrivate, "ulong", "a"), param(Space::kLocal, "float*", "tile"),
    param(Space::kConstant, "int*", "table", true)};

KernelSignature sig(std::vector<ArgSpec> args) { return {"mixk", {}, {}, std::move(args), ""}; }

TEST(CheckSignature, TheMatchingSignaturePasses) {
  EXPECT_TRUE(check_signature(sig({ArgSpec::buffer(), ArgSpec::const_buffer(),
                                   ArgSpec::scalar_of(ScalarType::kU64), ArgSpec::local(),
                                   ArgSpec::const_buffer()}),
                              kMixed)
                  .ok());
  // A const pointer may be passed as a plain buffer: kad only reads less.
  EXPECT_TRUE(check_signature(
                  sig({ArgSpec::buffer(), ArgSpec::buffer(), ArgSpec::scalar_of(ScalarType::kU64),
                       ArgSpec::local(), ArgSpec::const_buffer()}),
                  kMixed)
                  .ok());
}

TEST(CheckSignature, AnotherCountNamesBoth) {
  const absl::Status s = check_signature(sig({ArgSpec::buffer()}), kMixed);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "kernel `mixk` has 5 parameters after KAD_CONTEXT, its signature declares 1");
}

TEST(CheckSignature, EveryKindAndScalarTypeIsChecked) {
  const std::vector<ArgSpec> good = {ArgSpec::buffer(), ArgSpec::const_buffer(),
                                     ArgSpec::scalar_of(ScalarType::kU64), ArgSpec::local(),
                                     ArgSpec::const_buffer()};
  struct Case {
    size_t index;
    ArgSpec wrong;
    const char* message;
  };
  const Case cases[] = {
      {0, ArgSpec::scalar_of(ScalarType::kI64),
       "kernel `mixk`: argument 0 is declared a long but the kernel's parameter `out` has type "
       "`long*`"},
      {0, ArgSpec::const_buffer(),
       "argument 0 is declared a const buffer but the kernel's "
       "parameter `out` has type `long*`"},
      {1, ArgSpec::local(),
       "argument 1 is declared a local memory but the kernel's parameter "
       "`in` has type `const float*`"},
      {2, ArgSpec::buffer(),
       "argument 2 is declared a buffer but the kernel's parameter `a` has "
       "type `ulong`"},
      {2, ArgSpec::scalar_of(ScalarType::kI64), "argument 2 is declared a long"},
      {3, ArgSpec::buffer(), "argument 3 is declared a buffer but the kernel's parameter `tile`"},
      {4, ArgSpec::buffer(), "argument 4 is declared a buffer but the kernel's parameter `table`"},
  };
  for (const Case& c : cases) {
    std::vector<ArgSpec> args = good;
    args[c.index] = c.wrong;
    const absl::Status s = check_signature(sig(args), kMixed);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr(c.message));
  }
}

TEST(CheckSignature, AParameterWithoutANameIsDescribedByItsType) {
  const std::vector<KernelParameter> unnamed = {param(Space::kGlobal, "int*", "")};
  EXPECT_EQ(check_signature(sig({ArgSpec::scalar_of(ScalarType::kU64)}), unnamed).message(),
            "kernel `mixk`: argument 0 is declared a ulong but the kernel's parameter has type "
            "`int*`");
}

TEST(SignatureText, NamesEveryArgumentInOrder) {
  EXPECT_EQ(signature_text(sig({})), "");
  EXPECT_EQ(signature_text(sig({ArgSpec::const_buffer(), ArgSpec::buffer(),
                                ArgSpec::scalar_of(ScalarType::kF16), ArgSpec::local()})),
            "const buffer, buffer, half, local memory");
  EXPECT_NE(signature_text(sig({ArgSpec::buffer()})),
            signature_text(sig({ArgSpec::buffer(), ArgSpec::buffer()})));
}

}  // namespace
}  // namespace kad
