#include "tests/fuzz/api_fuzz_model.h"

#include <cctype>

namespace kad::api_fuzz {
namespace {

template <typename Map>
std::vector<uint64_t> keys(const Map& m) {
  std::vector<uint64_t> out;
  for (const auto& [k, v] : m) out.push_back(k);
  return out;
}

// Normalised as DESIGN §3 compares static and launch sizes: extents, offsets
// (zeros when absent), over 8 dimensions.
std::vector<int64_t> padded(const google::protobuf::RepeatedField<int64_t>& values, int64_t filler,
                            bool zero_is_one) {
  std::vector<int64_t> out(8, filler);
  for (int i = 0; i < values.size() && i < 8; ++i)
    out[static_cast<size_t>(i)] = zero_is_one && values[i] == 0 ? 1 : values[i];
  return out;
}

}  // namespace

bool has(const SessionModel& s, Kind kind, uint64_t handle) {
  switch (kind) {
    case Kind::kBuffer:
      return s.buffers.count(handle) > 0;
    case Kind::kQueue:
      return s.queues.count(handle) > 0;
    case Kind::kModule:
      return s.modules.count(handle) > 0;
    case Kind::kKernel:
      return s.kernels.count(handle) > 0;
  }
  return false;
}

bool surely_unknown(const SessionModel& s, Kind kind, uint64_t handle) {
  return s.uncertain.count(kind) == 0 && !has(s, kind, handle);
}

void unknown_handle_defect(const SessionModel& s, Kind kind, uint64_t handle, const char* why,
                           Defects* d) {
  if (surely_unknown(s, kind, handle))
    d->add(StatusCode::NOT_FOUND, why);
  else if (!has(s, kind, handle))
    d->tolerate(StatusCode::NOT_FOUND);
}

std::vector<uint64_t> handles(const SessionModel& s, Kind kind) {
  switch (kind) {
    case Kind::kBuffer:
      return keys(s.buffers);
    case Kind::kQueue:
      return keys(s.queues);
    case Kind::kModule:
      return keys(s.modules);
    case Kind::kKernel:
      return keys(s.kernels);
  }
  return {};
}

bool is_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

bool same_ndrange(const v1::NdRange& a, const v1::NdRange& b) {
  return a.extents_size() == b.extents_size() &&
         padded(a.extents(), 1, false) == padded(b.extents(), 1, false) &&
         padded(a.offsets(), 0, false) == padded(b.offsets(), 0, false);
}

bool same_workgroup(const v1::Workgroup& a, const v1::Workgroup& b) {
  return padded(a.sizes(), 1, true) == padded(b.sizes(), 1, true);
}

// Defects of an ndrange as a request gives it.
void ndrange_defects(const v1::NdRange& r, const char* what, Defects* d) {
  if (r.extents_size() > 8)
    d->add(StatusCode::INVALID_ARGUMENT, std::string(what) + " over 8 dimensions");
  if (!r.offsets().empty() && r.offsets_size() != r.extents_size())
    d->add(StatusCode::INVALID_ARGUMENT, std::string(what) + " offsets do not match its extents");
  for (int64_t e : r.extents()) {
    if (e < 0) {
      d->add(StatusCode::INVALID_ARGUMENT, std::string(what) + " has a negative extent");
      break;
    }
  }
}

void workgroup_defects(const v1::Workgroup& w, const char* what, Defects* d) {
  if (w.sizes_size() > 8)
    d->add(StatusCode::INVALID_ARGUMENT, std::string(what) + " over 8 dimensions");
  for (int64_t e : w.sizes()) {
    if (e < 0) {
      d->add(StatusCode::INVALID_ARGUMENT, std::string(what) + " has a negative size");
      break;
    }
  }
}

long double product(const google::protobuf::RepeatedField<int64_t>& values) {
  long double p = 1;
  for (int64_t v : values) p *= static_cast<long double>(v);
  return p;
}

bool has_ir_magic(v1::ModuleFormat format, const std::string& code) {
  if (code.size() < 4) return false;
  const auto* b = reinterpret_cast<const unsigned char*>(code.data());
  if (format == v1::MODULE_FORMAT_SPIRV)
    return (b[0] == 0x03 && b[1] == 0x02 && b[2] == 0x23 && b[3] == 0x07) ||
           (b[0] == 0x07 && b[1] == 0x23 && b[2] == 0x02 && b[3] == 0x03);
  return (b[0] == 'B' && b[1] == 'C' && b[2] == 0xC0 && b[3] == 0xDE) ||
         (b[0] == 0xDE && b[1] == 0xC0 && b[2] == 0x17 && b[3] == 0x0B);
}

const std::vector<BuildOption>& build_options() {
  static const std::vector<BuildOption> all = {
      {"-DX=1", true, true, true},
      {"-DX=42", true, true, true},
      {"-DX", true, true, true},
      {"-D X=7", true, true, true},
      {"-DVALUE=a_b.c+d-e", true, false, true},
      {"-UY", true, false, true},
      {"-w", true, false, true},
      {"-Werror", true, false, false},
      {"-cl-opt-disable", true, false, true},
      {"-cl-mad-enable", true, false, true},
      {"-cl-no-signed-zeros", true, false, true},
      {"-cl-unsafe-math-optimizations", true, false, true},
      {"-cl-finite-math-only", true, false, true},
      {"-cl-fast-relaxed-math", true, false, true},
      {"-cl-denorms-are-zero", true, false, true},
      {"-cl-single-precision-constant", true, false, true},
      {"-cl-fp32-correctly-rounded-divide-sqrt", true, false, true},
      // Hostile or merely not allowed: each must be refused, naming it.
      {"-D", false, false, false},
      {"-U", false, false, false},
      {"-I/etc", false, false, false},
      {"-I /etc", false, false, false},
      {"@/etc/passwd", false, false, false},
      {"-Xclang -load -Xclang /tmp/libkad-api-fuzz-evil.so", false, false, false},
      {"-include /etc/passwd", false, false, false},
      {"-fplugin=/tmp/libkad-api-fuzz-evil.so", false, false, false},
      {"-mllvm -debug-pass=Structure", false, false, false},
      {"-o /tmp/kad-api-fuzz-out", false, false, false},
      {"-save-temps", false, false, false},
      {"-D__KAD_RANK=1", false, false, false},
      {"-DKAD_RANK=9", false, false, false},
      {"-D1X=2", false, false, false},
      {"-DX=$(id)", false, false, false},
      {"-DX=1;rm", false, false, false},
      {"-DX==1", false, false, false},
      {"-DX=\"s\"", false, false, false},
      {"-DX=1\n#include \"/etc/passwd\"", false, false, false},
      {"-cl-std=CL2.0", false, false, false},
      {"-cl-kernel-arg-info", false, false, false},
      {"-x spir", false, false, false},
      {"--", false, false, false},
  };
  return all;
}

}  // namespace kad::api_fuzz
