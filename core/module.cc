#include "core/module.h"

#include <openssl/evp.h>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "core/opencl_source_check.h"

namespace kad {

absl::string_view module_format_name(ModuleFormat format) {
  switch (format) {
    case ModuleFormat::kOpenClC:
      return "OpenCL C";
    case ModuleFormat::kSpirv:
      return "SPIR-V";
    case ModuleFormat::kLlvmBitcodeSpir64:
      return "LLVM bitcode (spir64)";
    case ModuleFormat::kPtx:
      return "PTX";
    case ModuleFormat::kCubin:
      return "cubin";
    case ModuleFormat::kAmdgcnCodeObject:
      return "AMDGCN code object";
  }
  return "unknown";
}

std::string sha256_hex(absl::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(data.data(), data.size(), digest, &length, EVP_sha256(), nullptr);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(digest), length));
}

namespace {

uint32_t load_u32(absl::string_view bytes, size_t at, bool big_endian) {
  const auto b = [&](size_t i) {
    return static_cast<uint32_t>(static_cast<uint8_t>(bytes[at + i]));
  };
  return big_endian ? (b(0) << 24 | b(1) << 16 | b(2) << 8 | b(3))
                    : (b(3) << 24 | b(2) << 16 | b(1) << 8 | b(0));
}

absl::Status invalid(ModuleFormat format, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrFormat("%s module: %s", module_format_name(format), what));
}

// The header, the instruction stream's framing, the addressing model and the
// entry points: what kad relies on before handing the module to a tool.
absl::Status check_spirv(absl::string_view bytes) {
  constexpr ModuleFormat kFormat = ModuleFormat::kSpirv;
  constexpr uint32_t kMagic = 0x07230203;
  if (bytes.size() % 4 != 0) {
    return invalid(kFormat,
                   absl::StrFormat("%d bytes is not a whole number of 32-bit words", bytes.size()));
  }
  if (bytes.size() < 20) {
    return invalid(kFormat,
                   absl::StrFormat("%d bytes is shorter than the 5-word header", bytes.size()));
  }
  bool big_endian = false;
  if (load_u32(bytes, 0, false) != kMagic) {
    big_endian = true;
    if (load_u32(bytes, 0, true) != kMagic) {
      return invalid(kFormat, absl::StrFormat("magic number 0x%08x is not 0x07230203",
                                              load_u32(bytes, 0, false)));
    }
  }
  const size_t words = bytes.size() / 4;
  bool physical64 = false, entry_point = false;
  uint32_t last_opcode = 0;
  for (size_t at = 5; at < words;) {
    const uint32_t first = load_u32(bytes, at * 4, big_endian);
    const uint32_t count = first >> 16, opcode = first & 0xffff;
    if (count == 0) {
      return invalid(kFormat, absl::StrFormat("instruction at word %d has a word count of 0", at));
    }
    if (count > words - at) {
      return invalid(kFormat,
                     absl::StrFormat("truncated: instruction at word %d needs %d words, %d remain",
                                     at, count, words - at));
    }
    constexpr uint32_t kOpMemoryModel = 14, kOpEntryPoint = 15, kPhysical64 = 2;
    if (opcode == kOpMemoryModel && count >= 3) {
      const uint32_t addressing = load_u32(bytes, (at + 1) * 4, big_endian);
      if (addressing != kPhysical64) {
        return invalid(kFormat,
                       absl::StrFormat("addressing model %d is not Physical64 (2): kad takes "
                                       "spir64 modules",
                                       addressing));
      }
      physical64 = true;
    }
    entry_point = entry_point || opcode == kOpEntryPoint;
    last_opcode = opcode;
    at += count;
  }
  if (!physical64) return invalid(kFormat, "no OpMemoryModel (truncated?)");
  if (!entry_point) return invalid(kFormat, "no OpEntryPoint: the module has no kernel");
  // Functions come last in a module, and a module with a kernel has some.
  constexpr uint32_t kOpFunctionEnd = 56;
  if (last_opcode != kOpFunctionEnd) {
    return invalid(kFormat, "truncated: its last instruction is not OpFunctionEnd");
  }
  return absl::OkStatus();
}

absl::Status check_bitcode(absl::string_view bytes) {
  constexpr ModuleFormat kFormat = ModuleFormat::kLlvmBitcodeSpir64;
  constexpr absl::string_view kRawMagic("BC\xC0\xDE", 4);
  constexpr uint32_t kWrapperMagic = 0x0B17C0DE;
  if (bytes.size() >= 20 && load_u32(bytes, 0, false) == kWrapperMagic) {
    // The wrapper: magic, version, offset and size of the bitcode, CPU type.
    const uint64_t offset = load_u32(bytes, 8, false), size = load_u32(bytes, 12, false);
    if (offset < 20 || offset + size > bytes.size()) {
      return invalid(kFormat,
                     absl::StrFormat("truncated: the wrapper places %d bytes of bitcode at offset "
                                     "%d of %d bytes",
                                     size, offset, bytes.size()));
    }
    bytes = bytes.substr(offset, size);
  }
  if (bytes.size() < 4 || bytes.substr(0, 4) != kRawMagic) {
    return invalid(kFormat, "no bitcode magic (\"BC\" 0xC0DE, or the wrapper's 0x0B17C0DE)");
  }
  if (bytes.size() % 4 != 0) {
    return invalid(
        kFormat,
        absl::StrFormat("truncated: %d bytes is not a whole number of 32-bit words", bytes.size()));
  }
  return absl::OkStatus();
}

absl::Status check_ptx(absl::string_view text) {
  constexpr ModuleFormat kFormat = ModuleFormat::kPtx;
  if (!absl::StrContains(text, ".version")) return invalid(kFormat, "no .version directive");
  if (!absl::StrContains(text, ".target")) return invalid(kFormat, "no .target directive");
  const size_t nul = text.find('\0');
  if (nul != absl::string_view::npos &&
      text.find_first_not_of('\0', nul) != absl::string_view::npos) {
    return invalid(kFormat, absl::StrFormat("a NUL byte at offset %d: PTX is text", nul));
  }
  return absl::OkStatus();
}

// A 64-bit ELF file for `machine` (EM_CUDA, EM_AMDGPU).
absl::Status check_elf(ModuleFormat format, absl::string_view bytes, uint16_t machine) {
  constexpr size_t kElf64HeaderSize = 64;
  if (bytes.size() < 4 || bytes.substr(0, 4) != absl::string_view("\x7f"
                                                                  "ELF",
                                                                  4)) {
    return invalid(format, "no ELF magic (0x7f 'E' 'L' 'F')");
  }
  if (bytes.size() < kElf64HeaderSize) {
    return invalid(format, absl::StrFormat("truncated: %d bytes, an ELF header takes %d",
                                           bytes.size(), kElf64HeaderSize));
  }
  if (bytes[4] != 2) return invalid(format, "not a 64-bit ELF file (EI_CLASS is not ELFCLASS64)");
  const bool big_endian = bytes[5] == 2;
  const auto byte = [&](size_t i) { return static_cast<uint16_t>(static_cast<uint8_t>(bytes[i])); };
  const uint16_t e_machine = big_endian ? (byte(18) << 8 | byte(19)) : (byte(19) << 8 | byte(18));
  if (e_machine != machine) {
    return invalid(format, absl::StrFormat("ELF machine %d is not %d (%s)", e_machine, machine,
                                           machine == 190 ? "EM_CUDA" : "EM_AMDGPU"));
  }
  return absl::OkStatus();
}

absl::Status check_module(ModuleFormat format, absl::string_view bytes) {
  if (bytes.empty()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s module is empty", module_format_name(format)));
  }
  switch (format) {
    case ModuleFormat::kOpenClC:
      return check_opencl_source(bytes);
    case ModuleFormat::kSpirv:
      return check_spirv(bytes);
    case ModuleFormat::kLlvmBitcodeSpir64:
      return check_bitcode(bytes);
    case ModuleFormat::kPtx:
      return check_ptx(bytes);
    case ModuleFormat::kCubin:
      return check_elf(format, bytes, 190);
    case ModuleFormat::kAmdgcnCodeObject:
      return check_elf(format, bytes, 224);
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("module format %d is unknown", static_cast<int>(format)));
}

}  // namespace

absl::StatusOr<std::shared_ptr<const Module>> Module::create(ModuleFormat format,
                                                             std::string bytes) {
  if (absl::Status s = check_module(format, bytes); !s.ok()) return s;
  std::string tagged(1, static_cast<char>(format));
  tagged += bytes;
  std::string digest = sha256_hex(tagged);
  return std::shared_ptr<const Module>(new Module(format, std::move(bytes), std::move(digest)));
}

}  // namespace kad
