// Kernels submitted as spir64 LLVM bitcode and as SPIR-V (DESIGN §5), built
// against the prelude's linked form, on PoCL through the whole pipeline: the
// conformance suite's index kernel gives exactly what the same kernel
// submitted as OpenCL C gives; static sizes still fold; and what cannot run
// fails with an error that names it.
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <ostream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/formats/ir_modules.h"
#include "tests/support/index_kernel.h"
#include "tests/support/pocl.h"
#include "tests/support/pocl_ir.h"

namespace kad::testing {
extern const char* g_pocl_cache;
}  // namespace kad::testing

namespace kad {
namespace {

namespace fs = std::filesystem;
using testing::expected_record;
using ::testing::HasSubstr;
using testing::kFields;
using testing::kIndexKernel;
using testing::kPoison;

// How the client built the module: as bitcode or SPIR-V without LLVM's
// optimiser (the prelude's recommended command), or as bitcode at clang's
// default -O2 (inlined and optimised before kad links the specialisation).
enum class Build { kBitcode, kSpirv, kBitcodeO2 };

ModuleFormat format_of(Build b) {
  return b == Build::kSpirv ? ModuleFormat::kSpirv : ModuleFormat::kLlvmBitcodeSpir64;
}

const char* build_name(Build b) {
  switch (b) {
    case Build::kBitcode:
      return "bitcode";
    case Build::kSpirv:
      return "spirv";
    case Build::kBitcodeO2:
      return "bitcode_O2";
  }
  return "?";
}

// The IR of `source` for `build`, built once per process.
const std::string& ir_of(const std::string& source, Build build) {
  static auto* built = new std::map<std::pair<std::string, Build>, std::string>;
  auto [it, inserted] = built->try_emplace({source, build});
  if (inserted) {
    std::vector<std::string> flags;
    if (build != Build::kBitcodeO2) flags = {"-Xclang", "-disable-llvm-passes"};
    auto ir = testing::build_linked_ir(source, format_of(build), flags);
    EXPECT_TRUE(ir.ok()) << ir.status();
    if (ir.ok()) it->second = *std::move(ir);
  }
  return it->second;
}

struct IrCase {
  Build build;
  NdRange ndrange;
  std::optional<Dims> workgroup;  // none: tuned
  bool static_ndrange;
  bool static_workgroup;
};

std::string case_name(const IrCase& c) {
  std::string name =
      absl::StrCat(build_name(c.build), "__", testing::launch_shape_name(c.ndrange, c.workgroup));
  if (c.static_ndrange) name += "__static_ndrange";
  if (c.static_workgroup) name += "__static_workgroup";
  if (!c.static_ndrange && !c.static_workgroup) name += "__dynamic";
  return name;
}

void PrintTo(const IrCase& c, std::ostream* os) { *os << case_name(c); }

std::vector<IrCase> ir_cases() {
  struct Shape {
    NdRange ndrange;
    std::optional<Dims> workgroup;
    bool static_ndrange, static_workgroup;
  };
  const std::vector<Shape> shapes = {
      {NdRange(Dims{}), std::nullopt, false, false},
      {NdRange(Dims{7}), std::nullopt, false, false},
      {NdRange(Dims{37}), Dims{4}, true, false},
      {NdRange(Dims{64}), Dims{16}, true, true},  // divides evenly: no bounds check
      {NdRange(Dims{5, 7}), Dims{2, 3}, false, false},
      {NdRange(Dims{5, 7}), Dims{2, 3}, true, true},
      {NdRange(Dims{33, 3}), Dims{4}, false, true},
      {NdRange(Dims{3, 5, 7}), std::nullopt, false, false},
      {NdRange(Dims{3, 5, 7}), Dims{4, 1, 2}, true, true},
      {NdRange(Dims{2, 3, 4, 5}), Dims{2, 3}, false, false},  // rank 4: linear
      {NdRange(Dims{2, 3, 4, 5}), Dims{4, 1, 2}, true, true},
      {NdRange(Dims{9, 5}, Dims{0, -2}), std::nullopt, true, false},  // offsets
  };
  std::vector<IrCase> cases;
  for (Build b : {Build::kBitcode, Build::kSpirv, Build::kBitcodeO2}) {
    for (const Shape& s : shapes) {
      if (b == Build::kBitcodeO2 && s.ndrange.rank() != 2 && s.ndrange.rank() != 4) continue;
      cases.push_back({b, s.ndrange, s.workgroup, s.static_ndrange, s.static_workgroup});
    }
  }
  return cases;
}

class IrModules : public testing::PoclTest {
 protected:
  std::unique_ptr<Kernel> make_ir_kernel(ModuleFormat format, const std::string& ir,
                                         KernelSignature sig) {
    auto module = Module::create(format, ir);
    EXPECT_TRUE(module.ok()) << module.status();
    if (!module.ok()) return nullptr;
    auto kernel = Kernel::create(*module, std::move(sig));
    EXPECT_TRUE(kernel.ok()) << kernel.status();
    return kernel.ok() ? *std::move(kernel) : nullptr;
  }
};

class IrIndexQueries : public IrModules, public ::testing::WithParamInterface<IrCase> {};

TEST_P(IrIndexQueries, EveryQueryMatchesTheOpenClCModule) {
  const IrCase& c = GetParam();
  KernelSignature sig{"indices", std::nullopt, std::nullopt, {ArgSpec::buffer()}, ""};
  if (c.static_ndrange) sig.static_ndrange = c.ndrange;
  if (c.static_workgroup) sig.static_workgroup = c.workgroup;
  const std::string& ir = ir_of(kIndexKernel, c.build);
  ASSERT_FALSE(ir.empty());
  auto ir_kernel = make_ir_kernel(format_of(c.build), ir, sig);
  auto cl_kernel = make_kernel(kIndexKernel, sig);
  ASSERT_NE(ir_kernel, nullptr);
  ASSERT_NE(cl_kernel, nullptr);

  int64_t n = 1;
  ASSERT_TRUE(checked_product(c.ndrange.extents, &n));
  const int64_t guard = 64;  // poisoned records after the end catch stray writes
  const NdRange* ndrange = c.static_ndrange ? nullptr : &c.ndrange;
  const Dims* workgroup = (c.workgroup && !c.static_workgroup) ? &*c.workgroup : nullptr;
  std::vector<int64_t> results[2];
  std::optional<LaunchResult> launched;
  for (int i = 0; i < 2; ++i) {
    auto out = make_buffer<int64_t>(static_cast<size_t>((n + guard) * kFields), kPoison);
    const KernelArg args[] = {KernelArg::of_buffer(*out)};
    auto result = run(i == 0 ? *ir_kernel : *cl_kernel, ndrange, workgroup, args);
    ASSERT_TRUE(result.ok()) << result.status();
    launched = *result;
    results[i] = download<int64_t>(*out);
  }
  for (int64_t i = 0; i < n; ++i) {
    const std::vector<int64_t> want =
        expected_record(i, c.ndrange, launched->workgroup, launched->groups);
    const std::vector<int64_t> have(results[0].begin() + i * kFields,
                                    results[0].begin() + (i + 1) * kFields);
    ASSERT_EQ(have, want) << "work-item " << i << " of " << to_string(c.ndrange) << ", workgroup "
                          << to_string(launched->workgroup) << ", " << to_string(launched->choice);
  }
  for (size_t i = static_cast<size_t>(n * kFields); i < results[0].size(); ++i)
    ASSERT_EQ(results[0][i], kPoison) << "write past the ndrange at long " << i;
  EXPECT_EQ(results[0], results[1]) << "the IR module and the OpenCL C module differ";
}

INSTANTIATE_TEST_SUITE_P(Formats, IrIndexQueries, ::testing::ValuesIn(ir_cases()),
                         [](const auto& info) { return case_name(info.param); });

// ---------------------------------------------------------------------------
// Static sizes fold: the code PoCL generated, read back as LLVM IR.

// The IR of kernel `entry` as PoCL compiled it for this process.
std::string kernel_ir(const std::string& entry) {
  return testing::pocl_kernel_ir(KAD_LLVM_DIS, testing::g_pocl_cache, entry);
}

class IrCodegen : public IrModules {
 protected:
  std::string compile(Build build, const std::string& entry, const NdRange& range,
                      const Dims& workgroup) {
    const std::string source = "kernel void " + entry + R"((KAD_CONTEXT, global long* out) {
  if (kad_active()) out[kad_global_linear()] = kad_global_index(0);
})";
    auto kernel = make_ir_kernel(format_of(build), ir_of(source, build),
                                 {entry, range, workgroup, {ArgSpec::buffer()}, ""});
    if (kernel == nullptr) return {};
    int64_t n = 1;
    checked_product(range.extents, &n);
    auto out = make_buffer<int64_t>(static_cast<size_t>(n), -1);
    const KernelArg args[] = {KernelArg::of_buffer(*out)};
    auto r = run(*kernel, nullptr, nullptr, args);
    EXPECT_TRUE(r.ok()) << r.status();
    std::vector<int64_t> got = download<int64_t>(*out);
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(got[i], i % range.extents[0]);
    const std::string ir = kernel_ir(entry);
    EXPECT_FALSE(ir.empty()) << "no IR for " << entry << " under " << testing::g_pocl_cache;
    return ir;
  }
};

TEST_F(IrCodegen, StaticSizesThatDivideEvenlyLeaveNoCheckInIrModules) {
  for (Build b : {Build::kBitcode, Build::kSpirv}) {
    const std::string entry = absl::StrCat("even_", build_name(b));
    const std::string ir = compile(b, entry, NdRange(Dims{16, 8}), Dims{4, 4});
    EXPECT_EQ(testing::count_of(ir, "br i1"), 0) << ir;
    EXPECT_EQ(testing::count_of(ir, "icmp"), 0) << ir;
    EXPECT_EQ(testing::count_of(ir, "__kad_spec_"), 0) << "specialisation left out of line:\n"
                                                       << ir;
  }
}

TEST_F(IrCodegen, StaticSizesThatDoNotDivideKeepTheCheckInIrModules) {
  const std::string ir = compile(Build::kBitcode, "uneven_bitcode", NdRange(Dims{60}), Dims{16});
  EXPECT_GT(testing::count_of(ir, "icmp"), 0) << ir;
}

// ---------------------------------------------------------------------------
// What cannot run says why, and nothing crashes.

KernelSignature index_signature(const std::string& entry = "indices") {
  return {entry, NdRange(Dims{8}), std::nullopt, {ArgSpec::buffer()}, ""};
}

TEST_F(IrModules, PoclListsSpirvAndBitcodeAmongItsFormats) {
  EXPECT_THAT(device().info().formats,
              ::testing::IsSupersetOf({ModuleFormat::kOpenClC, ModuleFormat::kSpirv,
                                       ModuleFormat::kLlvmBitcodeSpir64}));
}

TEST_F(IrModules, AnEntryTheBitcodeModuleLacksIsNotFound) {
  for (Build b : {Build::kBitcode, Build::kSpirv}) {
    auto kernel = make_ir_kernel(format_of(b), ir_of(kIndexKernel, b), index_signature("absent"));
    ASSERT_NE(kernel, nullptr);
    auto out = make_buffer<int64_t>(8 * kFields, kPoison);
    const KernelArg args[] = {KernelArg::of_buffer(*out)};
    auto r = run(*kernel, nullptr, nullptr, args);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound) << r.status();
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("no kernel named `absent`"));
  }
}

TEST_F(IrModules, AModuleNotBuiltAgainstTheLinkedPreludeIsRefused) {
  Specialization spec;
  spec.choice.rank = 1;
  spec.choice.index_bits = 32;
  // The source form with one launch shape baked in, and no prelude at all.
  const std::string programs[] = {
      specialised_source(spec, kIndexKernel),
      "kernel void indices(global long* out) { out[get_global_id(0)] = 1; }"};
  for (const std::string& program : programs) {
    for (ModuleFormat format : {ModuleFormat::kLlvmBitcodeSpir64, ModuleFormat::kSpirv}) {
      auto ir = testing::build_plain_ir(program, format);
      ASSERT_TRUE(ir.ok()) << ir.status();
      auto kernel = make_ir_kernel(format, *ir, index_signature());
      ASSERT_NE(kernel, nullptr);
      auto out = make_buffer<int64_t>(8 * kFields, kPoison);
      const KernelArg args[] = {KernelArg::of_buffer(*out)};
      auto r = run(*kernel, nullptr, nullptr, args);
      EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
      EXPECT_THAT(std::string(r.status().message()), HasSubstr("linked prelude"));
      EXPECT_THAT(std::string(r.status().message()), HasSubstr("`indices`"));
    }
  }
}

TEST_F(IrModules, GarbageBehindAValidHeaderIsAnErrorNotACrash) {
  std::string bitcode("BC\xC0\xDE", 4);
  for (int i = 0; i < 60; ++i) bitcode.push_back(static_cast<char>(i * 37));
  // A SPIR-V header, Addresses, Physical64/OpenCL, an entry point whose
  // function does not exist, and an OpFunctionEnd with no function.
  const uint32_t words[] = {
      0x07230203, 0x00010000,      0, 100, 0,          (2u << 16) | 17, 4, (3u << 16) | 14, 2,
      2,          (4u << 16) | 15, 6, 99,  0x0000006b, (1u << 16) | 56};
  const std::string spirv(reinterpret_cast<const char*>(words), sizeof(words));
  for (auto [format, bytes] : {std::pair{ModuleFormat::kLlvmBitcodeSpir64, bitcode},
                               std::pair{ModuleFormat::kSpirv, spirv}}) {
    auto kernel = make_ir_kernel(format, bytes, index_signature());
    ASSERT_NE(kernel, nullptr);
    auto out = make_buffer<int64_t>(8 * kFields, kPoison);
    const KernelArg args[] = {KernelArg::of_buffer(*out)};
    auto r = run(*kernel, nullptr, nullptr, args);
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(std::string(r.status().message()),
                HasSubstr(std::string(module_format_name(format))))
        << r.status();
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("`indices`"));
  }
}

TEST_F(IrModules, DeviceCodeForAnotherDeviceIsRefusedByName) {
  auto module =
      Module::create(ModuleFormat::kPtx, ".version 7.8\n.target sm_80\n.address_size 64\n");
  ASSERT_TRUE(module.ok()) << module.status();
  auto kernel = Kernel::create(*module, index_signature());
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  auto out = make_buffer<int64_t>(8 * kFields, kPoison);
  const KernelArg args[] = {KernelArg::of_buffer(*out)};
  auto r = run(**kernel, nullptr, nullptr, args);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  const std::string message(r.status().message());
  EXPECT_THAT(message, HasSubstr("`indices`"));
  EXPECT_THAT(message, HasSubstr(device().info().id));
  EXPECT_THAT(message, HasSubstr("cannot run a PTX module"));
}

}  // namespace
}  // namespace kad
