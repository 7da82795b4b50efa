#include "server/shm_decode.h"

#include "absl/strings/str_format.h"

namespace kad::server {
namespace {

// kad.v1.ScalarType numbering (1 = I8 ... 11 = F64), core's order from kI8.
bool to_scalar(uint8_t wire, ScalarType* out) {
  if (wire < 1 || wire > 11) return false;
  *out = static_cast<ScalarType>(static_cast<uint8_t>(ScalarType::kI8) + wire - 1);
  return true;
}

}  // namespace

absl::Status decode_launch(const shm::v1::SubmitRecord& r, uint64_t queue, DecodedLaunch* out) {
  using shm::v1::kMaxRank;
  if (r.rank > kMaxRank || r.workgroup_rank > kMaxRank) {
    return absl::InvalidArgumentError(
        absl::StrFormat("launch record has rank %d and workgroup rank %d; the maximum is %d",
                        r.rank, r.workgroup_rank, kMaxRank));
  }
  if (r.nargs > shm::v1::kMaxArgs) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "launch record has %d arguments, more than the maximum of %d", r.nargs, shm::v1::kMaxArgs));
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
      case shm::v1::ArgKind::kScalar:
        if (!to_scalar(a.scalar, &k.scalar)) {
          return absl::InvalidArgumentError(absl::StrFormat(
              "argument %d: scalar type %d is not a kad.v1.ScalarType", i, a.scalar));
        }
        k.kind = ArgKind::kScalar;
        k.bits = a.value;
        break;
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
    return absl::InvalidArgumentError(
        absl::StrFormat("copy of %d bytes at arena offset %d does not fit in the %d-byte arena",
                        r.size, r.arena_offset, arena_bytes));
  }
  return absl::OkStatus();
}

}  // namespace kad::server
