// The hidden first argument of every kernel: the dynamic sizes of one launch.
// Its layout is `kad_context` in prelude/kad_prelude.cl.
#pragma once

#include <cstdint>

#include "core/dims.h"
#include "core/partition.h"

namespace kad {

struct LaunchContext {
  int64_t extent[kMaxRank];
  int64_t offset[kMaxRank];
  int64_t groupsize[kMaxRank];
  int64_t ngroups[kMaxRank];
};
static_assert(sizeof(LaunchContext) == 256, "must match kad_context in the prelude");

// Dimensions above the partition's rank hold extent 1, offset 0, 1 item, 1 group.
LaunchContext make_launch_context(const Partition& partition);

}  // namespace kad
