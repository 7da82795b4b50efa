#include "server/shm_decode.h"

#include "absl/strings/str_format.h"
#include "kad/v1/kad.pb.h"
#include "server/wire.h"

namespace kad::server {

absl::Status decode_launch(const shm::v1::SubmitRecord& r, uint64_t queue, DecodedLaunch* out) {
  using shm::v1::kMaxRank;
  if (r.rank > kMaxRank || r.workgroup_rank > kMaxRank) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "launch record has rank %d and workgroup rank %d; the maximum is %d", r.rank,
        r.workgroup_rank, kMaxRank));
  }
  if (r.nargs > shm::v1::kMaxArgs) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "launch record has %d arguments, more than the maximum of %d", r.nargs,
        shm::v1::kMaxArgs));
  }
  const bool has_ndrange = r.flags & shm::v1::kHasNdrange;
  const bool has_workgroup = r.flags & shm::v1::kHasWorkgroup;
  if (has_ndrange) {
    out->ndrange.extents = Dims();
    out->ndrange.offsets = Dims();
    out->ndrange.extents.rank = static_cast<int>(r.rank);
    out->ndrange.offsets.rank = static_cast<int>(r.rank);
    for (uint32_t d = 0; d < r.rank; ++d) {
      out->ndrange.extents[static_cast<int>(d)] = r.extents[d];
      out->ndrange.offsets[static_cast<int>(d)] =
          (r.flags & shm::v1::kHasOffsets) ? r.offsets[d] : 0;
    }
  }
  if (has_workgroup) {
    out->workgroup = Dims();
    out->workgroup.rank = static_cast<int>(r.workgroup_rank);
    for (uint32_t d = 0; d < r.workgroup_rank; ++d)
      out->workgroup[static_cast<int>(d)] = r.workgroup[d];
  }
  for (uint32_t i = 0; i < r.nargs; ++i) {
    const shm::v1::ArgRecord& a = r.args[i];
    KernelArg& k = out->args[i];
    k = KernelArg();
    switch (static_cast<shm::v1::ArgKind>(a.kind)) {
      case shm::v1::ArgKind::kBuffer:
        k.kind = ArgKind::kBuffer;
        k.bits = a.value;
        break;
      case shm::v1::ArgKind::kLocal:
        k.kind = ArgKind::kLocal;
        k.local_bytes = a.value;
        break;
      case shm::v1::ArgKind::kScalar: {
        absl::StatusOr<ScalarType> t = to_scalar_type(static_cast<v1::ScalarType>(a.scalar));
        if (!t.ok()) {
          return absl::InvalidArgumentError(
              absl::StrFormat("argument %d: %s", i, t.status().message()));
        }
        k.kind = ArgKind::kScalar;
        k.scalar = *t;
        k.bits = a.value;
        break;
      }
      default:
        return absl::InvalidArgumentError(
            absl::StrFormat("argument %d has kind %d, not buffer, scalar or local", i, a.kind));
    }
  }
  out->request = LaunchByHandle{queue, r.kernel, has_ndrange ? &out->ndrange : nullptr,
                                has_workgroup ? &out->workgroup : nullptr,
                                std::span<const KernelArg>(out->args.data(), r.nargs)};
  return absl::OkStatus();
}

absl::Status check_arena_range(const shm::v1::SubmitRecord& r, uint64_t arena_bytes) {
  uint64_t end;
  if (__builtin_add_overflow(r.arena_offset, r.size, &end) || end > arena_bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "copy of %d bytes at arena offset %d does not fit in the %d-byte arena", r.size,
        r.arena_offset, arena_bytes));
  }
  return absl::OkStatus();
}

}  // namespace kad::server
