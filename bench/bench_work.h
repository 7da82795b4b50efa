// What one benchmark runs: the kad kernels and their raw twins (plain OpenCL
// C, no prelude), and the launch shape.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kad_bench {

// The kad kernels and their raw OpenCL twins (no prelude, get_global_id).
// Float16 is storage-only `half` (vload_half / vstore_half), computed in float,
// so that it runs on devices without cl_khr_fp16.
inline std::string saxpy_source(const std::string& t, bool raw) {
  const bool half = t == "half";
  const std::string st = half ? "float" : t;  // the scalar's type
  const std::string body = absl::StrFormat(
      "(%s global %s* z, %s a, const global %s* restrict x, const global %s* restrict y) {\n",
      raw ? "" : "KAD_CONTEXT,", t, st, t, t);
  const std::string index = raw ? "  size_t i = get_global_id(0);\n"
                                : "  if (!kad_active()) return;\n  long i = kad_global_linear();\n";
  const std::string op = half ? "  vstore_half(a * vload_half(i, x) + vload_half(i, y), i, z);\n"
                              : "  z[i] = a * x[i] + y[i];\n";
  return absl::StrCat(t == "double" ? "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" : "",
                      "kernel void saxpy", body, index, op, "}\n");
}

// const/: a 16-step relaxation, its inputs `const restrict` (@Const) or not.
inline std::string relax_source(const std::string& t, bool marked, bool raw) {
  const std::string in =
      marked ? absl::StrCat("const global ", t, "* restrict") : absl::StrCat("global ", t, "*");
  return absl::StrCat(
      t == "double" ? "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" : "", "kernel void relax(",
      raw ? "" : "KAD_CONTEXT, ", "global ", t, "* out, ", in, " x, ", in, " y) {\n",
      raw ? "  long i = get_global_id(0), n = get_global_size(0);\n"
          : "  if (!kad_active()) return;\n  long i = kad_global_linear(), n = kad_ndrange(0);\n",
      "  ", t, " acc = 0;\n",
      "  for (int s = 0; s < 16; ++s) acc += x[(i + s) % n] * y[(i + 16 - s) % n];\n",
      "  out[i] = acc;\n}\n");
}

inline constexpr char kScale[] = R"(
kernel void scale(KAD_CONTEXT, global float* x, float a) {
  if (kad_active()) x[kad_global_linear()] *= a;
}
)";
inline constexpr char kRawScale[] = R"(
kernel void scale(global float* x, float a) {
  x[get_global_id(0) + get_global_size(0) * (get_global_id(1) + get_global_size(1) * get_global_id(2))] *= a;
}
)";

// What one benchmark launches.
struct Shape {
  std::vector<int64_t> ndrange;    // extents
  std::vector<int64_t> workgroup;  // empty: tuned
  bool static_ndrange = false;
  bool static_workgroup = false;
  bool give_workgroup = false;  // a dynamic workgroup size given at launch
};

struct Work {
  std::string kernel;  // "saxpy", "scale" or "relax"
  std::string type;    // element type: "float", "double" or "half"
  Shape shape;
  bool marked = true;  // relax: inputs const restrict
  size_t element_bytes() const { return type == "double" ? 8 : type == "half" ? 2 : 4; }
  // Arguments in order: B a buffer, C a const buffer, S the scalar `a`.
  std::string layout() const {
    if (kernel == "saxpy") return "BSCC";
    if (kernel == "relax") return marked ? "BCC" : "BBB";
    return "BS";
  }
  std::string source(bool raw) const {
    if (kernel == "saxpy") return saxpy_source(type, raw);
    if (kernel == "relax") return relax_source(type, marked, raw);
    return raw ? kRawScale : kScale;
  }
  bool double_scalar() const { return type == "double"; }
  int64_t items() const {
    int64_t n = 1;
    for (int64_t e : shape.ndrange) n *= e;
    return n;
  }
};

}  // namespace kad_bench
