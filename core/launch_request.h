// What a caller hands to the launch pipeline and what it gets back.
// Fixed-size records only: building and passing them never allocates (DESIGN §7).
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>

#include "core/dims.h"
#include "core/kernel_signature.h"
#include "core/select_launch.h"

namespace kad {

class Buffer;

// Identifies completion of one command on one queue. Queues are in order, so
// ids increase with submission. 0 names nothing pending: already complete.
using EventId = uint64_t;

template <typename T>
constexpr ScalarType scalar_type_of() {
  if constexpr (std::is_same_v<T, int8_t>)
    return ScalarType::kI8;
  else if constexpr (std::is_same_v<T, uint8_t>)
    return ScalarType::kU8;
  else if constexpr (std::is_same_v<T, int16_t>)
    return ScalarType::kI16;
  else if constexpr (std::is_same_v<T, uint16_t>)
    return ScalarType::kU16;
  else if constexpr (std::is_same_v<T, int32_t>)
    return ScalarType::kI32;
  else if constexpr (std::is_same_v<T, uint32_t>)
    return ScalarType::kU32;
  else if constexpr (std::is_same_v<T, int64_t>)
    return ScalarType::kI64;
  else if constexpr (std::is_same_v<T, uint64_t>)
    return ScalarType::kU64;
  else if constexpr (std::is_same_v<T, float>)
    return ScalarType::kF32;
  else if constexpr (std::is_same_v<T, double>)
    return ScalarType::kF64;
  else
    static_assert(sizeof(T) == 0, "not a kernel scalar type");
}

// One kernel argument, copied by value.
struct KernelArg {
  ArgKind kind = ArgKind::kScalar;
  ScalarType scalar = ScalarType::kNone;
  Buffer* buffer = nullptr;  // kBuffer / kConstBuffer
  uint64_t bits = 0;         // kScalar: the value's bytes, little end first
  uint64_t local_bytes = 0;  // kLocal

  // A buffer binds to a parameter declared as buffer or const buffer.
  static KernelArg of_buffer(Buffer& b) {
    KernelArg a;
    a.kind = ArgKind::kBuffer;
    a.buffer = &b;
    return a;
  }
  template <typename T>
  static KernelArg of_scalar(T value) {
    KernelArg a;
    a.kind = ArgKind::kScalar;
    a.scalar = scalar_type_of<T>();
    std::memcpy(&a.bits, &value, sizeof(T));
    return a;
  }
  static KernelArg of_half_bits(uint16_t bits) {
    KernelArg a;
    a.kind = ArgKind::kScalar;
    a.scalar = ScalarType::kF16;
    a.bits = bits;
    return a;
  }
  static KernelArg of_local(uint64_t bytes) {
    KernelArg a;
    a.kind = ArgKind::kLocal;
    a.local_bytes = bytes;
    return a;
  }
};

struct LaunchRequest {
  const NdRange* ndrange = nullptr;  // null: the kernel's static ndrange
  const Dims* workgroup = nullptr;   // null: static, or tuned
  std::span<const KernelArg> args;
};

struct LaunchResult {
  EventId event = 0;
  bool empty = false;     // an extent was 0: nothing compiled or launched
  LaunchChoice choice;    // meaningful when !empty
  Dims workgroup;         // the workgroup size used (tuned or given)
  Dims groups;            // blocks per dimension
  bool compiled = false;  // this launch compiled the kernel (a cache miss)
};

}  // namespace kad
