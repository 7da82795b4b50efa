#include "core/dims.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kad {

Dims::Dims(std::initializer_list<int64_t> values) {
  for (int64_t x : values) {
    if (rank == kMaxRank) break;  // callers validate ranks before building
    v[static_cast<size_t>(rank++)] = x;
  }
}

Dims Dims::filled(int rank, int64_t value) {
  Dims d;
  d.rank = rank;
  for (int i = 0; i < rank; ++i) d[i] = value;
  return d;
}

bool Dims::any_zero() const {
  for (int d = 0; d < rank; ++d)
    if (v[static_cast<size_t>(d)] == 0) return true;
  return false;
}

bool checked_product(const Dims& dims, int64_t* product) {
  int64_t p = 1;
  for (int d = 0; d < dims.rank; ++d) {
    if (__builtin_mul_overflow(p, dims[d], &p)) return false;
  }
  *product = p;
  return true;
}

std::string to_string(const Dims& dims) {
  std::string out = "(";
  for (int d = 0; d < dims.rank; ++d) absl::StrAppend(&out, d ? ", " : "", dims[d]);
  return out + ")";
}

bool NdRange::has_offsets() const {
  for (int d = 0; d < offsets.rank; ++d)
    if (offsets[d] != 0) return true;
  return false;
}

std::string to_string(const NdRange& range) {
  if (!range.has_offsets()) return to_string(range.extents);
  std::string out = "(";
  for (int d = 0; d < range.rank(); ++d) {
    absl::StrAppend(&out, d ? ", " : "", range.offsets[d], ":",
                    range.offsets[d] + range.extents[d] - 1);
  }
  return out + ")";
}

}  // namespace kad
