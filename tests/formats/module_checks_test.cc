// Module::create's checks (DESIGN §5): every format is recognised by what it
// must start with and how it must be framed, and a module that is not what it
// claims fails at once with an error naming the format and the fault.
#include <cstring>

#include "core/module.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/formats/ir_modules.h"
#include "tests/support/index_kernel.h"

namespace kad {
namespace {

using ::testing::HasSubstr;

std::string built(ModuleFormat format, std::vector<std::string> flags = {}) {
  flags.insert(flags.begin(), {"-Xclang", "-disable-llvm-passes"});
  auto ir = testing::build_linked_ir(testing::kIndexKernel, format, flags);
  EXPECT_TRUE(ir.ok()) << ir.status();
  return ir.ok() ? *ir : std::string();
}

// Expects `create` to fail with INVALID_ARGUMENT naming the format and `fault`.
void expect_refused(ModuleFormat format, const std::string& bytes, const std::string& fault) {
  auto m = Module::create(format, bytes);
  ASSERT_FALSE(m.ok()) << module_format_name(format) << " accepted";
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument) << m.status();
  EXPECT_THAT(std::string(m.status().message()),
              HasSubstr(std::string(module_format_name(format))));
  EXPECT_THAT(std::string(m.status().message()), HasSubstr(fault));
}

std::string swap_words(std::string bytes) {
  for (size_t i = 0; i + 4 <= bytes.size(); i += 4) {
    std::swap(bytes[i], bytes[i + 3]);
    std::swap(bytes[i + 1], bytes[i + 2]);
  }
  return bytes;
}

// A 64-bit little-endian ELF header for `machine`.
std::string elf_header(uint16_t machine) {
  std::string h(64, '\0');
  std::memcpy(h.data(),
              "\x7f"
              "ELF",
              4);
  h[4] = 2;  // ELFCLASS64
  h[5] = 1;  // little-endian
  h[18] = static_cast<char>(machine & 0xff);
  h[19] = static_cast<char>(machine >> 8);
  return h;
}

TEST(ModuleChecks, SpirvIsAcceptedInEitherByteOrder) {
  const std::string spirv = built(ModuleFormat::kSpirv);
  EXPECT_TRUE(Module::create(ModuleFormat::kSpirv, spirv).ok());
  auto swapped = Module::create(ModuleFormat::kSpirv, swap_words(spirv));
  EXPECT_TRUE(swapped.ok()) << swapped.status();
}

TEST(ModuleChecks, TruncatedSpirvIsRefused) {
  const std::string spirv = built(ModuleFormat::kSpirv);
  // Cut inside the first instruction after the header, then after the last
  // whole instruction before the end.
  uint32_t first;
  std::memcpy(&first, spirv.data() + 20, 4);
  ASSERT_GT(first >> 16, 1u);
  expect_refused(ModuleFormat::kSpirv, spirv.substr(0, 24 + 4 * ((first >> 16) - 2)), "truncated");
  expect_refused(ModuleFormat::kSpirv, spirv.substr(0, spirv.size() - 4), "truncated");
  expect_refused(ModuleFormat::kSpirv, spirv.substr(0, spirv.size() - 1), "32-bit words");
  expect_refused(ModuleFormat::kSpirv, spirv.substr(0, 16), "header");
  expect_refused(ModuleFormat::kSpirv, spirv.substr(0, 20), "no OpMemoryModel");
}

TEST(ModuleChecks, SpirvWithTheWrongMagicIsRefused) {
  std::string spirv = built(ModuleFormat::kSpirv);
  spirv[0] = 0x04;
  expect_refused(ModuleFormat::kSpirv, spirv, "magic");
  expect_refused(ModuleFormat::kSpirv, built(ModuleFormat::kLlvmBitcodeSpir64), "");
}

TEST(ModuleChecks, SpirvFor32BitAddressesIsRefused) {
  expect_refused(ModuleFormat::kSpirv, built(ModuleFormat::kSpirv, {"-target", "spir"}),
                 "Physical64");
}

TEST(ModuleChecks, BitcodeIsAcceptedRawAndWrapped) {
  const std::string bc = built(ModuleFormat::kLlvmBitcodeSpir64);
  EXPECT_TRUE(Module::create(ModuleFormat::kLlvmBitcodeSpir64, bc).ok());
  // The wrapper: magic 0x0B17C0DE, version 0, offset 20, size, CPU type 0.
  const uint32_t header[] = {0x0B17C0DE, 0, 20, static_cast<uint32_t>(bc.size()), 0};
  std::string wrapped(reinterpret_cast<const char*>(header), sizeof(header));
  wrapped += bc;
  auto m = Module::create(ModuleFormat::kLlvmBitcodeSpir64, wrapped);
  EXPECT_TRUE(m.ok()) << m.status();
  expect_refused(ModuleFormat::kLlvmBitcodeSpir64, wrapped.substr(0, wrapped.size() - 8),
                 "truncated");
}

TEST(ModuleChecks, BitcodeWithTheWrongMagicOrSizeIsRefused) {
  const std::string bc = built(ModuleFormat::kLlvmBitcodeSpir64);
  expect_refused(ModuleFormat::kLlvmBitcodeSpir64, "kernel void k(KAD_CONTEXT) {}", "magic");
  expect_refused(ModuleFormat::kLlvmBitcodeSpir64, built(ModuleFormat::kSpirv), "magic");
  expect_refused(ModuleFormat::kLlvmBitcodeSpir64, bc.substr(0, bc.size() - 3), "truncated");
}

TEST(ModuleChecks, PtxNeedsVersionAndTarget) {
  EXPECT_TRUE(Module::create(ModuleFormat::kPtx, ".version 7.8\n.target sm_80\n").ok());
  expect_refused(ModuleFormat::kPtx, ".target sm_80\n", ".version");
  expect_refused(ModuleFormat::kPtx, ".version 7.8\n", ".target");
  expect_refused(ModuleFormat::kPtx, std::string(".version 7.8\n.target sm_80\n\0junk", 31), "NUL");
}

TEST(ModuleChecks, CubinsAndCodeObjectsAreElfForTheirMachine) {
  EXPECT_TRUE(Module::create(ModuleFormat::kCubin, elf_header(190)).ok());
  EXPECT_TRUE(Module::create(ModuleFormat::kAmdgcnCodeObject, elf_header(224)).ok());
  expect_refused(ModuleFormat::kCubin, elf_header(224), "EM_CUDA");
  expect_refused(ModuleFormat::kAmdgcnCodeObject, elf_header(190), "EM_AMDGPU");
  expect_refused(ModuleFormat::kCubin, elf_header(190).substr(0, 40), "truncated");
  expect_refused(ModuleFormat::kAmdgcnCodeObject, "MZ not an elf file", "ELF magic");
}

TEST(ModuleChecks, EmptyModulesAreRefusedInEveryFormat) {
  for (ModuleFormat f :
       {ModuleFormat::kOpenClC, ModuleFormat::kSpirv, ModuleFormat::kLlvmBitcodeSpir64,
        ModuleFormat::kPtx, ModuleFormat::kCubin, ModuleFormat::kAmdgcnCodeObject}) {
    expect_refused(f, "", "empty");
  }
}

TEST(ModuleChecks, TheDigestCoversTheFormatAndTheBytes) {
  auto m = Module::create(ModuleFormat::kOpenClC, "kernel");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ((*m)->digest(), sha256_hex(std::string("\x01kernel")));
}

}  // namespace
}  // namespace kad
