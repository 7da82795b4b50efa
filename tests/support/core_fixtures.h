// Shared values for host-only tests of core/: one definition of the
// CUDA-like limits DESIGN §3 uses, of a launch choice and of a signature.
#pragma once

#include <cstdint>
#include <optional>

#include "core/device_limits.h"
#include "core/dims.h"
#include "core/kernel_signature.h"
#include "core/select_launch.h"
#include "core/specialization.h"

namespace kad::testing {

// 1024 items per group, (1024, 1024, 64) per dimension, (2^31-1, 65535, 65535) groups.
inline DeviceLimits CudaLimits() {
  DeviceLimits l;
  l.max_workgroup_size = 1024;
  l.max_workgroup_dims = {1024, 1024, 64};
  l.max_groups = {2147483647, 65535, 65535};
  return l;
}

inline LaunchChoice Choice(int rank, bool linear, int bits) {
  LaunchChoice c;
  c.rank = static_cast<uint8_t>(rank);
  c.linear = linear;
  c.index_bits = static_cast<uint8_t>(bits);
  return c;
}

// A specialisation with that launch choice and no static sizes.
inline Specialization Spec(int rank, bool linear, int bits) {
  Specialization s;
  s.choice = Choice(rank, linear, bits);
  return s;
}

// A kernel `saxpy` with the given static sizes.
inline KernelSignature Kernel(std::optional<NdRange> static_ndrange = std::nullopt,
                              std::optional<Dims> static_workgroup = std::nullopt) {
  KernelSignature k;
  k.entry = "saxpy";
  k.static_ndrange = std::move(static_ndrange);
  k.static_workgroup = std::move(static_workgroup);
  return k;
}

}  // namespace kad::testing
