#include "core/module.h"

#include <openssl/evp.h>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_format.h"

namespace kad {

absl::string_view module_format_name(ModuleFormat format) {
  switch (format) {
    case ModuleFormat::kOpenClC: return "OpenCL C";
    case ModuleFormat::kSpirv: return "SPIR-V";
    case ModuleFormat::kLlvmBitcodeSpir64: return "LLVM bitcode (spir64)";
    case ModuleFormat::kPtx: return "PTX";
    case ModuleFormat::kCubin: return "cubin";
    case ModuleFormat::kAmdgcnCodeObject: return "AMDGCN code object";
  }
  return "unknown";
}

std::string sha256_hex(absl::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(data.data(), data.size(), digest, &length, EVP_sha256(), nullptr);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), length));
}

absl::StatusOr<std::shared_ptr<const Module>> Module::create(ModuleFormat format,
                                                             std::string bytes) {
  if (format != ModuleFormat::kOpenClC) {
    return absl::UnimplementedError(absl::StrFormat(
        "module format %s is not supported yet; submit OpenCL C", module_format_name(format)));
  }
  if (bytes.empty()) return absl::InvalidArgumentError("module source is empty");
  std::string tagged(1, static_cast<char>(format));
  tagged += bytes;
  std::string digest = sha256_hex(tagged);
  return std::shared_ptr<const Module>(new Module(format, std::move(bytes), std::move(digest)));
}

}  // namespace kad
