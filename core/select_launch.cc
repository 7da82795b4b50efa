#include "core/select_launch.h"

#include <algorithm>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace kad {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

int64_t limit_of(const std::array<uint64_t, 3>& limits, int d) {
  const uint64_t l = d < 3 ? limits[static_cast<size_t>(d)] : limits[0];
  return static_cast<int64_t>(std::min<uint64_t>(l, kInt64Max));
}

absl::StatusOr<uint8_t> index_bits_for(absl::string_view kernel, const Dims& extents,
                                       const Dims& padded, bool padded_overflowed) {
  if (extents.any_zero()) return uint8_t{32};
  int64_t total;
  if (padded_overflowed || !checked_product(padded, &total)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("kernel `%s`: iteration space %s has more than 2^63-1 work-items", kernel,
                        to_string(extents)));
  }
  return static_cast<uint8_t>(total <= kInt32Max ? 32 : 64);
}

}  // namespace

std::string to_string(const LaunchChoice& c) {
  return absl::StrFormat("%s, %d-bit indices, rank %d", c.linear ? "linear" : "N-d grid",
                         c.index_bits, c.rank);
}

int64_t workgroup_dim_limit(const DeviceLimits& limits, bool linear, int d) {
  return limit_of(limits.max_workgroup_dims, linear ? 0 : d);
}

Dims padded_bound(const Dims& extents, const DeviceLimits& limits, bool linear, bool* overflowed) {
  Dims padded = Dims::filled(extents.rank, 0);
  int64_t capacity = static_cast<int64_t>(std::min<uint64_t>(limits.max_workgroup_size, kInt64Max));
  for (int d = 0; d < extents.rank; ++d) {
    const int64_t e = extents[d];
    const int64_t items =
        std::max<int64_t>(1, std::min({e, capacity, workgroup_dim_limit(limits, linear, d)}));
    int64_t p = 0;
    if (e != 0 && __builtin_add_overflow(e, items - 1, &p)) {
      p = kInt64Max;
      if (overflowed != nullptr) *overflowed = true;
    }
    padded[d] = p;
    capacity = std::max<int64_t>(1, capacity / items);
  }
  return padded;
}

absl::StatusOr<LaunchChoice> select_launch(absl::string_view kernel, const Dims& extents,
                                           const Dims* workgroup, const DeviceLimits& limits) {
  LaunchChoice choice;
  choice.rank = static_cast<uint8_t>(extents.rank);
  bool nd = extents.rank <= 3;
  Dims padded;
  bool overflow = false;

  if (workgroup == nullptr) {
    // Any tuned workgroup has blocks <= extent, so the grid fits the device's
    // group limits whenever every extent does.
    for (int d = 0; d < extents.rank && nd; ++d) nd = extents[d] <= limit_of(limits.max_groups, d);
    padded = padded_bound(extents, limits, !nd, &overflow);
  } else {
    padded = Dims::filled(extents.rank, 0);
    int64_t items_total = 1;
    for (int d = 0; d < extents.rank; ++d) {
      const int64_t w = d < workgroup->rank && (*workgroup)[d] > 0 ? (*workgroup)[d] : 1;
      const int64_t e = extents[d];
      const int64_t blocks = e == 0 ? 0 : (e - 1) / w + 1;
      if (__builtin_mul_overflow(blocks, w, &padded[d])) overflow = true;
      if (__builtin_mul_overflow(items_total, w, &items_total)) items_total = kInt64Max;
      if (w > limit_of(limits.max_workgroup_dims, d) || blocks > limit_of(limits.max_groups, d))
        nd = false;
    }
    if (static_cast<uint64_t>(items_total) > limits.max_workgroup_size) nd = false;
  }
  choice.linear = !nd;
  absl::StatusOr<uint8_t> bits = index_bits_for(kernel, extents, padded, overflow);
  if (!bits.ok()) return bits.status();
  choice.index_bits = *bits;
  return choice;
}

}  // namespace kad
