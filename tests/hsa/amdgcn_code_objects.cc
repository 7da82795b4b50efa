#include "tests/hsa/amdgcn_code_objects.h"

#include <cstdlib>
#include <fstream>

#include "core/specialization.h"
#include "core/toolchain.h"

namespace kad::hsa::testing {

const char kManyArgsSource[] = R"(
kernel void many_args(KAD_CONTEXT, global float* out, const global float* restrict in,
                      float scale, uchar flag, local int* scratch, ulong n, short s,
                      local float4* tile) {
  local int cache[64];
  const int i = (int)kad_global_linear();
  scratch[get_local_id(0)] = i;
  cache[get_local_id(0) % 64] = i;
  tile[get_local_id(0)] = (float4)(scale);
  barrier(CLK_LOCAL_MEM_FENCE);
  if (kad_active())
    out[i] = in[i] * scale + flag + (float)n + s + scratch[0] + cache[1] + tile[0].x;
}

__attribute__((amdgpu_flat_work_group_size(1, 1024)))
kernel void wide(KAD_CONTEXT, global long* out) {
  // OpenCL's own index queries read the hidden arguments (the global offset).
  if (kad_active()) out[kad_global_linear()] = get_global_id(0) + get_global_offset(1);
}

__attribute__((reqd_work_group_size(64, 1, 1)))
kernel void fixed(KAD_CONTEXT, global int* out) {
  if (kad_active()) out[kad_global_linear()] = 2;
}
)";

KernelSignature many_args_signature() {
  KernelSignature sig;
  sig.entry = "many_args";
  sig.args = {ArgSpec::buffer(),
              ArgSpec::const_buffer(),
              ArgSpec::scalar_of(ScalarType::kF32),
              ArgSpec::scalar_of(ScalarType::kU8),
              ArgSpec::local(),
              ArgSpec::scalar_of(ScalarType::kU64),
              ArgSpec::scalar_of(ScalarType::kI16),
              ArgSpec::local()};
  return sig;
}

const absl::StatusOr<std::string>& many_args_code_object() {
  static const absl::StatusOr<std::string>* code = [] {
    absl::StatusOr<Toolchain> toolchain = Toolchain::find();
    if (!toolchain.ok()) return new absl::StatusOr<std::string>(toolchain.status());
    Specialization spec;
    spec.choice.rank = 1;
    spec.choice.linear = false;
    spec.choice.index_bits = 32;
    auto* code = new absl::StatusOr<std::string>(toolchain->lower(
        CodeTarget::kAmdgcn, specialised_source(spec, kManyArgsSource), "gfx90a", ""));
    // KAD_HSACO_OUT: keep the code object, for llvm-readobj --notes.
    if (const char* keep = std::getenv("KAD_HSACO_OUT"); keep != nullptr && code->ok()) {
      std::ofstream(keep, std::ios::binary) << **code;
    }
    return code;
  }();
  return *code;
}

}  // namespace kad::hsa::testing
