// A kernel's static launch metadata (DESIGN §2): what the kernel fixes at
// compile time and what each of its arguments is. Everything here is known
// before the first launch and is part of the specialisation key.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/dims.h"

namespace kad {

enum class ScalarType : uint8_t {
  kNone,
  kI8,
  kU8,
  kI16,
  kU16,
  kI32,
  kU32,
  kI64,
  kU64,
  kF16,
  kF32,
  kF64,
};

// The OpenCL C spelling ("float", "ulong", "half").
absl::string_view scalar_type_name(ScalarType type);
// Size in bytes (F16 is 2: stored as its bits).
size_t scalar_type_size(ScalarType type);

enum class ArgKind : uint8_t {
  kBuffer,       // global T*: read and written
  kConstBuffer,  // const global T* restrict: read only, never aliased
  kScalar,       // passed by value
  kLocal,        // local T*: workgroup memory of a size given at launch
};

absl::string_view arg_kind_name(ArgKind kind);

struct ArgSpec {
  ArgKind kind = ArgKind::kBuffer;
  ScalarType scalar = ScalarType::kNone;  // only for kScalar
  bool operator==(const ArgSpec&) const = default;

  static ArgSpec buffer() { return {ArgKind::kBuffer, ScalarType::kNone}; }
  static ArgSpec const_buffer() { return {ArgKind::kConstBuffer, ScalarType::kNone}; }
  static ArgSpec scalar_of(ScalarType t) { return {ArgKind::kScalar, t}; }
  static ArgSpec local() { return {ArgKind::kLocal, ScalarType::kNone}; }
};

// "buffer", "const buffer", "float", "local memory".
std::string to_string(const ArgSpec& spec);

struct KernelSignature {
  std::string entry;                      // the kernel function's name
  std::optional<NdRange> static_ndrange;  // fixed iteration space, if any
  std::optional<Dims> static_workgroup;   // fixed workgroup size, if any
  std::vector<ArgSpec> args;              // the user's arguments, in order
  std::string build_options;              // extra compiler options for this kernel
};

// The argument kinds of a signature as text ("buffer, const buffer, float"):
// part of every specialisation key, so that a compiled kernel — checked
// against its parameters for one signature — never serves another.
std::string signature_text(const KernelSignature& signature);

// One parameter of a compiled kernel (after KAD_CONTEXT), as its driver
// reports it.
struct KernelParameter {
  enum class Space : uint8_t { kPrivate, kGlobal, kConstant, kLocal };
  Space space = Space::kPrivate;
  bool is_const = false;  // a const-qualified pointee
  std::string type;       // OpenCL C spelling: "float*", "ulong"
  std::string name;
  bool operator==(const KernelParameter&) const = default;
};

// Checks a signature against a kernel's parameters: the count, then each
// argument's kind and scalar type. INVALID_ARGUMENT naming the kernel, the
// argument and both sides.
absl::Status check_signature(const KernelSignature& signature,
                             std::span<const KernelParameter> parameters);

}  // namespace kad
