#include "server/wire.h"

#include "absl/strings/str_format.h"

namespace kad::server {
namespace {

template <typename Repeated>
absl::Status fill_dims(const Repeated& values, absl::string_view what, Dims* out) {
  if (values.size() > kMaxRank) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s has %d dimensions, more than the maximum of %d", what, values.size(), kMaxRank));
  }
  *out = Dims();
  for (int64_t v : values) out->v[static_cast<size_t>(out->rank++)] = v;
  return absl::OkStatus();
}

}  // namespace

absl::Status to_ndrange(const v1::NdRange& wire, NdRange* out) {
  if (absl::Status s = fill_dims(wire.extents(), "ndrange", &out->extents); !s.ok()) return s;
  if (wire.offsets().empty()) {
    out->offsets = Dims::filled(out->extents.rank, 0);
    return absl::OkStatus();
  }
  if (wire.offsets_size() != wire.extents_size()) {
    return absl::InvalidArgumentError(absl::StrFormat("ndrange has %d extents but %d offsets",
                                                      wire.extents_size(), wire.offsets_size()));
  }
  return fill_dims(wire.offsets(), "ndrange offsets", &out->offsets);
}

absl::Status to_dims(const v1::Workgroup& wire, Dims* out) {
  return fill_dims(wire.sizes(), "workgroup size", out);
}

absl::StatusOr<ScalarType> to_scalar_type(v1::ScalarType wire) {
  switch (wire) {
    case v1::SCALAR_TYPE_I8:
      return ScalarType::kI8;
    case v1::SCALAR_TYPE_U8:
      return ScalarType::kU8;
    case v1::SCALAR_TYPE_I16:
      return ScalarType::kI16;
    case v1::SCALAR_TYPE_U16:
      return ScalarType::kU16;
    case v1::SCALAR_TYPE_I32:
      return ScalarType::kI32;
    case v1::SCALAR_TYPE_U32:
      return ScalarType::kU32;
    case v1::SCALAR_TYPE_I64:
      return ScalarType::kI64;
    case v1::SCALAR_TYPE_U64:
      return ScalarType::kU64;
    case v1::SCALAR_TYPE_F16:
      return ScalarType::kF16;
    case v1::SCALAR_TYPE_F32:
      return ScalarType::kF32;
    case v1::SCALAR_TYPE_F64:
      return ScalarType::kF64;
    default:
      return absl::InvalidArgumentError(
          absl::StrFormat("scalar type %d is not a kad.v1.ScalarType", static_cast<int>(wire)));
  }
}

v1::ScalarType to_wire(ScalarType type) {
  switch (type) {
    case ScalarType::kNone:
      return v1::SCALAR_TYPE_UNSPECIFIED;
    case ScalarType::kI8:
      return v1::SCALAR_TYPE_I8;
    case ScalarType::kU8:
      return v1::SCALAR_TYPE_U8;
    case ScalarType::kI16:
      return v1::SCALAR_TYPE_I16;
    case ScalarType::kU16:
      return v1::SCALAR_TYPE_U16;
    case ScalarType::kI32:
      return v1::SCALAR_TYPE_I32;
    case ScalarType::kU32:
      return v1::SCALAR_TYPE_U32;
    case ScalarType::kI64:
      return v1::SCALAR_TYPE_I64;
    case ScalarType::kU64:
      return v1::SCALAR_TYPE_U64;
    case ScalarType::kF16:
      return v1::SCALAR_TYPE_F16;
    case ScalarType::kF32:
      return v1::SCALAR_TYPE_F32;
    case ScalarType::kF64:
      return v1::SCALAR_TYPE_F64;
  }
  return v1::SCALAR_TYPE_UNSPECIFIED;
}

absl::Status to_kernel_arg(const v1::KernelArg& wire, size_t index, KernelArg* out) {
  *out = KernelArg();
  switch (wire.value_case()) {
    case v1::KernelArg::kBuffer:
      out->kind = ArgKind::kBuffer;
      out->bits = wire.buffer();
      return absl::OkStatus();
    case v1::KernelArg::kScalarBits: {
      absl::StatusOr<ScalarType> t = to_scalar_type(wire.scalar());
      if (!t.ok()) {
        return absl::InvalidArgumentError(
            absl::StrFormat("argument %d: %s", index, t.status().message()));
      }
      out->kind = ArgKind::kScalar;
      out->scalar = *t;
      out->bits = wire.scalar_bits();
      return absl::OkStatus();
    }
    case v1::KernelArg::kLocalBytes:
      out->kind = ArgKind::kLocal;
      out->local_bytes = wire.local_bytes();
      return absl::OkStatus();
    case v1::KernelArg::VALUE_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("argument %d has no value (buffer, scalar or local bytes)", index));
}

absl::StatusOr<ModuleFormat> to_module_format(v1::ModuleFormat wire) {
  switch (wire) {
    case v1::MODULE_FORMAT_OPENCL_C:
      return ModuleFormat::kOpenClC;
    case v1::MODULE_FORMAT_SPIRV:
      return ModuleFormat::kSpirv;
    case v1::MODULE_FORMAT_LLVM_BC_SPIR64:
      return ModuleFormat::kLlvmBitcodeSpir64;
    case v1::MODULE_FORMAT_PTX:
      return ModuleFormat::kPtx;
    case v1::MODULE_FORMAT_CUBIN:
      return ModuleFormat::kCubin;
    case v1::MODULE_FORMAT_AMDGCN:
      return ModuleFormat::kAmdgcnCodeObject;
    default:
      return absl::InvalidArgumentError(
          absl::StrFormat("module format %d is not a kad.v1.ModuleFormat", static_cast<int>(wire)));
  }
}

absl::StatusOr<KernelSignature> to_signature(const v1::GetKernelRequest& wire) {
  KernelSignature sig;
  sig.entry = wire.entry();
  sig.build_options = wire.build_options();
  if (wire.has_static_ndrange()) {
    NdRange r;
    if (absl::Status s = to_ndrange(wire.static_ndrange(), &r); !s.ok()) return s;
    sig.static_ndrange = r;
  }
  if (wire.has_static_workgroup()) {
    Dims w;
    if (absl::Status s = to_dims(wire.static_workgroup(), &w); !s.ok()) return s;
    sig.static_workgroup = w;
  }
  for (int i = 0; i < wire.args_size(); ++i) {
    const v1::ArgSpec& a = wire.args(i);
    if (a.kind() != v1::ARG_KIND_SCALAR && a.scalar() != v1::SCALAR_TYPE_UNSPECIFIED) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "kernel `%s`: argument %d is not a scalar (kind %d) but names scalar type %d", sig.entry,
          i, static_cast<int>(a.kind()), static_cast<int>(a.scalar())));
    }
    switch (a.kind()) {
      case v1::ARG_KIND_BUFFER:
        sig.args.push_back(ArgSpec::buffer());
        break;
      case v1::ARG_KIND_CONST_BUFFER:
        sig.args.push_back(ArgSpec::const_buffer());
        break;
      case v1::ARG_KIND_LOCAL:
        sig.args.push_back(ArgSpec::local());
        break;
      case v1::ARG_KIND_SCALAR: {
        absl::StatusOr<ScalarType> t = to_scalar_type(a.scalar());
        if (!t.ok()) {
          return absl::InvalidArgumentError(
              absl::StrFormat("kernel `%s`: argument %d: %s", sig.entry, i, t.status().message()));
        }
        sig.args.push_back(ArgSpec::scalar_of(*t));
        break;
      }
      default:
        return absl::InvalidArgumentError(absl::StrFormat(
            "kernel `%s`: argument %d has no kind (buffer, const buffer, scalar, local)", sig.entry,
            i));
    }
  }
  return sig;
}

void to_wire(const DeviceInfo& info, bool is_default, v1::Device* out) {
  out->set_id(info.id);
  out->set_backend(info.backend);
  out->set_name(info.name);
  out->set_vendor(info.vendor);
  out->set_platform(info.platform);
  out->set_driver_version(info.driver_version);
  out->set_is_cpu(info.is_cpu);
  out->set_is_default(is_default);
  v1::DeviceLimits* l = out->mutable_limits();
  l->set_max_workgroup_size(info.limits.max_workgroup_size);
  for (uint64_t v : info.limits.max_workgroup_dims) l->add_max_workgroup_dims(v);
  for (uint64_t v : info.limits.max_groups) l->add_max_groups(v);
  l->set_max_total_groups(info.limits.max_total_groups);
  l->set_compute_units(info.limits.compute_units);
  l->set_global_memory_bytes(info.limits.global_memory_bytes);
  l->set_max_allocation_bytes(info.limits.max_allocation_bytes);
  l->set_local_memory_bytes(info.limits.local_memory_bytes);
  for (ModuleFormat f : info.formats) out->add_formats(static_cast<v1::ModuleFormat>(f));
}

}  // namespace kad::server
