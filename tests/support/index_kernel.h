// The index-query kernel of the conformance suite and the record each lane
// must write, shared by the in-process and the end-to-end conformance tests.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/dims.h"

namespace kad::testing {

constexpr int64_t kPoison = -7777777;
constexpr int kFields = 32;  // longs written per work-item

// Each active lane writes every index query into its own record, at the
// position kad_global_linear() gives.
constexpr char kIndexKernel[] = R"(
kernel void indices(KAD_CONTEXT, global long* out) {
  if (!kad_active()) return;
  global long* r = out + kad_global_linear() * 32;
  r[0] = kad_global_linear();
  for (uint d = 0; d < 4; ++d) {
    r[1 + d] = kad_global_index(d);
    r[5 + d] = kad_local_index(d);
    r[10 + d] = kad_group_index(d);
    r[15 + d] = kad_groupsize(d);
    r[19 + d] = kad_ngroups(d);
    r[23 + d] = kad_ndrange(d);
    r[27 + d] = kad_ndrange_offset(d);
  }
  r[9] = kad_local_linear();
  r[14] = kad_group_linear();
  r[31] = kad_ndrange_rank();
}
)";

// The record a lane at column-major position `linear` must have written.
inline std::vector<int64_t> expected_record(int64_t linear, const NdRange& range, const Dims& wg,
                                            const Dims& groups) {
  std::vector<int64_t> r(kFields, 0);
  r[0] = linear;
  int64_t rest = linear, local_linear = 0, group_linear = 0, local_stride = 1, group_stride = 1;
  for (int d = 0; d < 4; ++d) {
    const bool used = d < range.rank();
    const int64_t pos = used ? rest % range.extents[d] : 0;
    if (used) rest /= range.extents[d];
    const int64_t w = used ? wg[d] : 1;
    r[1 + d] = used ? range.offsets[d] + pos : 0;
    r[5 + d] = pos % w;
    r[10 + d] = pos / w;
    r[15 + d] = w;
    r[19 + d] = used ? groups[d] : 1;
    r[23 + d] = used ? range.extents[d] : 1;
    r[27 + d] = used ? range.offsets[d] : 0;
    local_linear += (pos % w) * local_stride;
    group_linear += (pos / w) * group_stride;
    local_stride *= w;
    group_stride *= used ? groups[d] : 1;
  }
  r[9] = local_linear;
  r[14] = group_linear;
  r[31] = range.rank();
  return r;
}

// A launch's shape for a test name: "nd_9_5atm2__wg_tuned", "nd__wg_4_1_2".
inline std::string launch_shape_name(const NdRange& ndrange, const std::optional<Dims>& workgroup) {
  std::string name = "nd";
  for (int d = 0; d < ndrange.rank(); ++d) {
    absl::StrAppend(&name, "_", ndrange.extents[d]);
    if (ndrange.offsets[d] != 0)
      absl::StrAppend(&name, "at", ndrange.offsets[d] < 0 ? "m" : "", std::abs(ndrange.offsets[d]));
  }
  name += "__wg";
  if (!workgroup)
    name += "_tuned";
  else
    for (int d = 0; d < workgroup->rank; ++d) absl::StrAppend(&name, "_", (*workgroup)[d]);
  return name;
}

}  // namespace kad::testing
