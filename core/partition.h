// Stage 1 of the launch pipeline (DESIGN §3.1): turn a launch's ndrange and
// workgroup size into blocks, checked against the kernel's static sizes.
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/dims.h"
#include "core/kernel_signature.h"

namespace kad {

struct Partition {
  NdRange ndrange;              // the iteration space: the static one or the launch's
  Dims workgroup;               // padded with 1s to the ndrange's rank; a 0 became 1
  Dims blocks;                  // ceil(extent / workgroup) per dimension; 0 where the extent is 0
  bool dynamic_check = false;   // some extent is not a multiple of its workgroup size
  bool tune_workgroup = false;  // `workgroup` is preliminary: dynamic and not given
  bool static_blocks = false;   // ndrange and workgroup are both static

  bool empty() const { return ndrange.extents.any_zero(); }
};

// Partitions a launch of `kernel`. `ndrange` and `workgroup` are what the
// launch gave (null when it gave none). With a dynamic workgroup size and none
// given, the workgroup is the whole ndrange (one block per dimension) and
// `tune_workgroup` is set: tuning picks the real size later.
absl::StatusOr<Partition> partition(const KernelSignature& kernel, const NdRange* ndrange,
                                    const Dims* workgroup);

// Splits `ndrange` into blocks of `workgroup` (the NDIteration rule). Used by
// `partition` and again after tuning; never changes what is static.
absl::StatusOr<Partition> partition_blocks(absl::string_view kernel, const NdRange& ndrange,
                                           const Dims& workgroup);

}  // namespace kad
