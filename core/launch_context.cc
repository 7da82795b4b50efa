#include "core/launch_context.h"

namespace kad {

LaunchContext make_launch_context(const Partition& p) {
  LaunchContext ctx;
  for (int d = 0; d < kMaxRank; ++d) {
    const bool used = d < p.ndrange.rank();
    ctx.extent[d] = used ? p.ndrange.extents[d] : 1;
    ctx.offset[d] = used ? p.ndrange.offsets[d] : 0;
    ctx.groupsize[d] = used ? p.workgroup[d] : 1;
    ctx.ngroups[d] = used ? p.blocks[d] : 1;
  }
  return ctx;
}

}  // namespace kad
