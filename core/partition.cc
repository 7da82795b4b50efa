#include "core/partition.h"

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace kad {
namespace {

absl::Status check_ndrange(absl::string_view kernel, const NdRange& range) {
  if (range.offsets.rank != range.extents.rank) {
    return absl::InvalidArgumentError(
        absl::StrFormat("kernel `%s`: ndrange %s has %d dimensions but %d offsets", kernel,
                        to_string(range.extents), range.extents.rank, range.offsets.rank));
  }
  for (int d = 0; d < range.rank(); ++d) {
    if (range.extents[d] < 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("kernel `%s`: ndrange %s has a negative extent %d in dimension %d",
                          kernel, to_string(range.extents), range.extents[d], d));
    }
    int64_t last;
    if (__builtin_add_overflow(range.offsets[d], range.extents[d], &last)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("kernel `%s`: ndrange offset %d plus extent %d overflows in dimension %d",
                          kernel, range.offsets[d], range.extents[d], d));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Partition> partition_blocks(absl::string_view kernel, const NdRange& ndrange,
                                           const Dims& workgroup) {
  if (absl::Status s = check_ndrange(kernel, ndrange); !s.ok()) return s;
  if (workgroup.rank > ndrange.rank()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "kernel `%s`: workgroup size %s has %d dimensions, more than the ndrange %s (%d)", kernel,
        to_string(workgroup), workgroup.rank, to_string(ndrange), ndrange.rank()));
  }
  Partition p;
  p.ndrange = ndrange;
  p.workgroup = Dims::filled(ndrange.rank(), 1);
  p.blocks = Dims::filled(ndrange.rank(), 0);
  for (int d = 0; d < ndrange.rank(); ++d) {
    if (d < workgroup.rank) {
      if (workgroup[d] < 0) {
        return absl::InvalidArgumentError(
            absl::StrFormat("kernel `%s`: workgroup size %s is negative in dimension %d", kernel,
                            to_string(workgroup), d));
      }
      p.workgroup[d] = workgroup[d] == 0 ? 1 : workgroup[d];
    }
    const int64_t n = ndrange.extents[d];
    const int64_t w = p.workgroup[d];
    p.blocks[d] = n == 0 ? 0 : (n - 1) / w + 1;  // ceil without overflow
    if (n % w != 0) p.dynamic_check = true;
  }
  return p;
}

absl::StatusOr<Partition> partition(const KernelSignature& kernel, const NdRange* ndrange,
                                    const Dims* workgroup) {
  const absl::string_view name = kernel.entry;
  NdRange range;
  if (kernel.static_ndrange) {
    if (ndrange && *ndrange != *kernel.static_ndrange) {
      return absl::InvalidArgumentError(
          absl::StrFormat("kernel `%s`: static ndrange %s and launch ndrange %s differ", name,
                          to_string(*kernel.static_ndrange), to_string(*ndrange)));
    }
    range = *kernel.static_ndrange;
  } else if (ndrange) {
    range = *ndrange;
  } else {
    return absl::InvalidArgumentError(absl::StrFormat(
        "cannot partition kernel `%s`: its ndrange is dynamic and the launch gave none", name));
  }

  Dims wgs;
  bool tune = false;
  if (kernel.static_workgroup) {
    if (workgroup && *workgroup != *kernel.static_workgroup) {
      return absl::InvalidArgumentError(
          absl::StrFormat("kernel `%s`: static workgroup size %s and launch workgroup size %s "
                          "differ",
                          name, to_string(*kernel.static_workgroup), to_string(*workgroup)));
    }
    wgs = *kernel.static_workgroup;
  } else if (workgroup) {
    wgs = *workgroup;
  } else {
    // Preliminary: the whole ndrange, one block per dimension (also when the
    // ndrange is static). Tuning replaces it without changing what is compiled.
    wgs = range.extents;
    tune = true;
  }

  absl::StatusOr<Partition> p = partition_blocks(name, range, wgs);
  if (!p.ok()) return p;
  p->tune_workgroup = tune;
  p->static_blocks = kernel.static_ndrange.has_value() && kernel.static_workgroup.has_value();
  return p;
}

}  // namespace kad
