// Submitted kernel code, content-addressed by SHA-256 of its format and bytes.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kad {

// The formats of DESIGN §5. OpenCL C is compiled with the prelude in its
// source form; SPIR-V and spir64 bitcode must be built against the prelude's
// linked form (core/prelude/kad_prelude.cl); PTX, cubin and AMDGCN code
// objects are device code, run as they are where the device takes them.
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
  // Checks what can be checked without a compiler: SPIR-V's header, word
  // framing, Physical64 addressing and entry points (either byte order);
  // bitcode's magic (raw or wrapped) and size; PTX's .version and .target;
  // the ELF header and machine of cubins (EM_CUDA) and code objects
  // (EM_AMDGPU). INVALID_ARGUMENT naming the format and the fault otherwise.
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
