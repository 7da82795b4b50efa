// Module::create's checks (DESIGN §5): every format is recognised by what it
// must start with and how it must be framed, and a module that is not what it
// claims fails at once with an error naming the format and the fault.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/module.h"
#include "gmock/gmock.h"
#include "gtest/gtest-spi.h"
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

// Expects `create` to fail with INVALID_ARGUMENT naming the format and `fault`,
// a distinctive part of the refusal's message (core/module.cc). An empty
// `fault` would match any message: it is itself a failure.
void expect_refused(ModuleFormat format, const std::string& bytes, const std::string& fault) {
  ASSERT_FALSE(fault.empty()) << "expect_refused needs the text the refusal must contain";
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
  const uint32_t count = first >> 16;
  expect_refused(ModuleFormat::kSpirv, spirv.substr(0, 24 + 4 * (count - 2)),
                 absl::StrFormat("truncated: instruction at word 5 needs %d words, %d remain",
                                 count, count - 1));
  expect_refused(ModuleFormat::kSpirv, spirv.substr(0, spirv.size() - 4),
                 "truncated: its last instruction is not OpFunctionEnd");
  expect_refused(
      ModuleFormat::kSpirv, spirv.substr(0, spirv.size() - 1),
      absl::StrFormat("%d bytes is not a whole number of 32-bit words", spirv.size() - 1));
  expect_refused(ModuleFormat::kSpirv, spirv.substr(0, 16),
                 "16 bytes is shorter than the 5-word header");
  expect_refused(ModuleFormat::kSpirv, spirv.substr(0, 20), "no OpMemoryModel (truncated?)");
}

TEST(ModuleChecks, SpirvWithTheWrongMagicIsRefused) {
  std::string spirv = built(ModuleFormat::kSpirv);
  spirv[0] = 0x04;
  expect_refused(ModuleFormat::kSpirv, spirv, "magic number 0x07230204 is not 0x07230203");
  // Raw bitcode starts "BC" 0xC0 0xDE: neither byte order of the SPIR-V magic.
  expect_refused(ModuleFormat::kSpirv, built(ModuleFormat::kLlvmBitcodeSpir64),
                 "magic number 0xdec04342 is not 0x07230203");
}

TEST(ModuleChecks, SpirvFor32BitAddressesIsRefused) {
  expect_refused(ModuleFormat::kSpirv, built(ModuleFormat::kSpirv, {"-target", "spir"}),
                 "addressing model 1 is not Physical64 (2)");
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
                 absl::StrFormat("truncated: the wrapper places %d bytes of bitcode at offset 20 "
                                 "of %d bytes",
                                 bc.size(), wrapped.size() - 8));
}

TEST(ModuleChecks, BitcodeWithTheWrongMagicOrSizeIsRefused) {
  const std::string bc = built(ModuleFormat::kLlvmBitcodeSpir64);
  const std::string no_magic = "no bitcode magic (\"BC\" 0xC0DE, or the wrapper's 0x0B17C0DE)";
  expect_refused(ModuleFormat::kLlvmBitcodeSpir64, "kernel void k(KAD_CONTEXT) {}", no_magic);
  expect_refused(ModuleFormat::kLlvmBitcodeSpir64, built(ModuleFormat::kSpirv), no_magic);
  expect_refused(
      ModuleFormat::kLlvmBitcodeSpir64, bc.substr(0, bc.size() - 3),
      absl::StrFormat("truncated: %d bytes is not a whole number of 32-bit words", bc.size() - 3));
}

TEST(ModuleChecks, PtxNeedsVersionAndTarget) {
  EXPECT_TRUE(Module::create(ModuleFormat::kPtx, ".version 7.8\n.target sm_80\n").ok());
  expect_refused(ModuleFormat::kPtx, ".target sm_80\n", "no .version directive");
  expect_refused(ModuleFormat::kPtx, ".version 7.8\n", "no .target directive");
  expect_refused(ModuleFormat::kPtx, std::string(".version 7.8\n.target sm_80\n\0junk", 31),
                 "a NUL byte at offset 27: PTX is text");
}

TEST(ModuleChecks, CubinsAndCodeObjectsAreElfForTheirMachine) {
  EXPECT_TRUE(Module::create(ModuleFormat::kCubin, elf_header(190)).ok());
  EXPECT_TRUE(Module::create(ModuleFormat::kAmdgcnCodeObject, elf_header(224)).ok());
  expect_refused(ModuleFormat::kCubin, elf_header(224), "ELF machine 224 is not 190 (EM_CUDA)");
  expect_refused(ModuleFormat::kAmdgcnCodeObject, elf_header(190),
                 "ELF machine 190 is not 224 (EM_AMDGPU)");
  expect_refused(ModuleFormat::kCubin, elf_header(190).substr(0, 40),
                 "truncated: 40 bytes, an ELF header takes 64");
  std::string elf32 = elf_header(190);
  elf32[4] = 1;  // ELFCLASS32
  expect_refused(ModuleFormat::kCubin, elf32, "not a 64-bit ELF file (EI_CLASS is not ELFCLASS64)");
  expect_refused(ModuleFormat::kAmdgcnCodeObject, "MZ not an elf file",
                 "no ELF magic (0x7f 'E' 'L' 'F')");
}

TEST(ModuleChecks, EmptyModulesAreRefusedInEveryFormat) {
  for (ModuleFormat f :
       {ModuleFormat::kOpenClC, ModuleFormat::kSpirv, ModuleFormat::kLlvmBitcodeSpir64,
        ModuleFormat::kPtx, ModuleFormat::kCubin, ModuleFormat::kAmdgcnCodeObject}) {
    expect_refused(f, "", absl::StrCat(module_format_name(f), " module is empty"));
  }
}

TEST(ModuleChecks, AnExpectationOfNoTextIsItselfAFailure) {
  // HasSubstr("") matches every message: expect_refused refuses it.
  EXPECT_FATAL_FAILURE(expect_refused(ModuleFormat::kPtx, "", ""),
                       "expect_refused needs the text the refusal must contain");
}

TEST(ModuleChecks, TheDigestCoversTheFormatAndTheBytes) {
  auto m = Module::create(ModuleFormat::kOpenClC, "kernel");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ((*m)->digest(), sha256_hex(std::string("\x01kernel")));
}

}  // namespace
}  // namespace kad
