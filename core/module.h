// Submitted kernel code, content-addressed by SHA-256 of its format and bytes.
#pragma once

#include <memory>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace kad {

// The formats of DESIGN §5. Only OpenCL C is accepted so far; the others are
// reserved and rejected with a clear error until their toolchain exists.
enum class ModuleFormat : uint8_t {
  kOpenClC = 1,
  kSpirv = 2,
  kLlvmBitcodeSpir64 = 3,
  kPtx = 4,
  kCubin = 5,
  kAmdgcnCodeObject = 6,
};

absl::string_view module_format_name(ModuleFormat format);

class Module {
 public:
  static absl::StatusOr<std::shared_ptr<const Module>> create(ModuleFormat format,
                                                              std::string bytes);

  ModuleFormat format() const { return format_; }
  const std::string& bytes() const { return bytes_; }
  // Lower-case hex SHA-256 of the format byte followed by the bytes.
  const std::string& digest() const { return digest_; }

 private:
  Module(ModuleFormat format, std::string bytes, std::string digest)
      : format_(format), bytes_(std::move(bytes)), digest_(std::move(digest)) {}
  ModuleFormat format_;
  std::string bytes_;
  std::string digest_;
};

// Lower-case hex SHA-256 of `data`.
std::string sha256_hex(absl::string_view data);

}  // namespace kad
