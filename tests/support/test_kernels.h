// Kernels several tests share.
#pragma once

namespace kad::testing {

// out[i] = i * seed + k: each launch's result tells which launch wrote it.
inline constexpr char kAffineKernel[] = R"(
kernel void affine(KAD_CONTEXT, global int* out, int seed, int k) {
  if (kad_active()) out[kad_global_linear()] = (int)kad_global_linear() * seed + k;
}
)";

}  // namespace kad::testing
