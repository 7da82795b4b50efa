#include "core/launch.h"

#include <limits>

#include "core/launch_context.h"
#include "core/launch_geometry.h"
#include "core/partition.h"
#include "core/select_launch.h"
#include "core/specialization.h"
#include "core/tune.h"

namespace kad {
namespace {

uint64_t saturated_items(const Dims& extents) {
  int64_t n;
  return checked_product(extents, &n) ? static_cast<uint64_t>(n)
                                      : std::numeric_limits<int64_t>::max();
}

}  // namespace

absl::StatusOr<LaunchResult> launch(Kernel& kernel, Queue& queue, KernelCache& cache,
                                    const LaunchRequest& request, DeferredCompile* defer) {
  Device& device = queue.device();
  if (LaunchOverride* custom = device.launch_override()) {
    return custom->launch(kernel, queue, request);
  }
  const KernelSignature& sig = kernel.signature();
  const DeviceLimits& limits = device.info().limits;

  // 1. Partition.
  absl::StatusOr<Partition> part = partition(sig, request.ndrange, request.workgroup);
  if (!part.ok()) return part.status();
  if (absl::Status s = validate_args(sig, request.args, device); !s.ok()) return s;
  if (!part->tune_workgroup) {
    if (absl::Status s = validate_workgroup(sig.entry, part->workgroup, limits); !s.ok()) return s;
  }
  LaunchResult result;
  if (part->empty()) {
    result.empty = true;
    result.workgroup = part->workgroup;
    result.groups = part->blocks;
    return result;  // nothing to compile, nothing to run: complete at once
  }

  // 2. Select. Independent of the size tuning will pick.
  absl::StatusOr<LaunchChoice> choice = select_launch(
      sig.entry, part->ndrange.extents, part->tune_workgroup ? nullptr : &part->workgroup, limits);
  if (!choice.ok()) return choice.status();

  // 3. Compile (or find).
  const Specialization spec = specialize(sig, *part, *choice);
  absl::StatusOr<CompiledKernel*> compiled =
      defer != nullptr ? kernel.find_specialization(device, spec, cache)
                       : kernel.specialization(device, spec, cache, &result.compiled);
  if (!compiled.ok()) return compiled.status();
  if (*compiled == nullptr) {
    *defer = DeferredCompile{true, &device, spec};
    return result;
  }

  // 4. Tune: only a dynamic workgroup size the launch did not give.
  if (part->tune_workgroup) {
    const uint64_t threads = (*compiled)->launch_configuration(
        saturated_items(part->ndrange.extents), limits.max_workgroup_size);
    const Dims tuned = threads_to_workgroup(threads, part->ndrange.extents, *choice, limits);
    absl::StatusOr<Partition> retuned = partition_blocks(sig.entry, part->ndrange, tuned);
    if (!retuned.ok()) return retuned.status();
    retuned->tune_workgroup = true;
    part = *retuned;
  }

  // 5. Launch.
  const LaunchGeometry geometry = launch_geometry(*part, *choice);
  if (absl::Status s = validate_geometry(sig.entry, geometry, (*compiled)->limits(), limits);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<EventId> event =
      queue.enqueue_kernel(**compiled, geometry, make_launch_context(*part), request.args);
  if (!event.ok()) return event.status();
  result.event = *event;
  result.choice = *choice;
  result.workgroup = part->workgroup;
  result.groups = part->blocks;
  return result;
}

}  // namespace kad
