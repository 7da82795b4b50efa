// Fixed-capacity index tuples for ndranges, workgroup sizes and block counts.
//
// Fixed arrays (never vectors) so that the warm launch path allocates nothing
// (DESIGN §7). Dimension 0 is the fastest-varying one: layouts are column-major,
// as in KernelAbstractions.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

namespace kad {

// The highest ndrange rank a kernel can be launched with. Ranks above 3 run as
// linear launches whose kernels recover Cartesian indices.
inline constexpr int kMaxRank = 8;

struct Dims {
  int rank = 0;
  std::array<int64_t, kMaxRank> v{};  // entries at and above `rank` stay 0

  Dims() = default;
  Dims(std::initializer_list<int64_t> values);
  static Dims filled(int rank, int64_t value);

  int64_t operator[](int d) const { return v[static_cast<size_t>(d)]; }
  int64_t& operator[](int d) { return v[static_cast<size_t>(d)]; }
  bool operator==(const Dims&) const = default;

  bool any_zero() const;
};

// The product of all entries, or false if it does not fit in int64_t.
// The product of a rank-0 tuple is 1.
bool checked_product(const Dims& dims, int64_t* product);

// "(5, 7)"; a rank-0 tuple prints as "()".
std::string to_string(const Dims& dims);

// An iteration space: extents per dimension and the index each dimension
// starts at (0 unless the kernel or launch says otherwise).
struct NdRange {
  Dims extents;
  Dims offsets;  // same rank as extents

  NdRange() = default;
  explicit NdRange(const Dims& e) : extents(e), offsets(Dims::filled(e.rank, 0)) {}
  NdRange(const Dims& e, const Dims& o) : extents(e), offsets(o) {}
  bool operator==(const NdRange&) const = default;
  int rank() const { return extents.rank; }
  bool has_offsets() const;
};

// "(5, 7)" or, with offsets, "(0:8, -2:2)" (first:last per dimension).
std::string to_string(const NdRange& range);

}  // namespace kad
