#include "server/worker/worker_codec.h"

#include "absl/strings/str_format.h"
#include "core/kernel.h"

namespace kad::server::worker {
namespace {

void put(const Dims& d, wire::Dims* out) {
  for (int i = 0; i < d.rank; ++i) out->add_v(d[i]);
}
void put(const NdRange& r, wire::NdRange* out) {
  put(r.extents, out->mutable_extents());
  put(r.offsets, out->mutable_offsets());
}

absl::StatusOr<Dims> get(const wire::Dims& d) {
  if (d.v_size() > kMaxRank) {
    return absl::InvalidArgumentError(absl::StrFormat("%d dimensions", d.v_size()));
  }
  Dims out;
  out.rank = d.v_size();
  for (int i = 0; i < d.v_size(); ++i) out[i] = d.v(i);
  return out;
}
absl::StatusOr<NdRange> get(const wire::NdRange& r) {
  absl::StatusOr<Dims> e = get(r.extents());
  absl::StatusOr<Dims> o = get(r.offsets());
  if (!e.ok()) return e.status();
  if (!o.ok()) return o.status();
  return NdRange(*e, *o);
}

}  // namespace

wire::Compile to_message(const CompileRequest& request) {
  wire::Compile m;
  m.set_format(static_cast<uint32_t>(request.module.format()));
  m.set_module(request.module.bytes());
  wire::Signature* sig = m.mutable_signature();
  sig->set_entry(request.signature.entry);
  if (request.signature.static_ndrange)
    put(*request.signature.static_ndrange, sig->mutable_static_ndrange());
  if (request.signature.static_workgroup)
    put(*request.signature.static_workgroup, sig->mutable_static_workgroup());
  for (const ArgSpec& a : request.signature.args) {
    wire::ArgSpec* w = sig->add_args();
    w->set_kind(static_cast<uint32_t>(a.kind));
    w->set_scalar(static_cast<uint32_t>(a.scalar));
  }
  sig->set_build_options(request.signature.build_options);
  wire::Specialization* spec = m.mutable_spec();
  spec->set_rank(request.spec.choice.rank);
  spec->set_linear(request.spec.choice.linear);
  spec->set_index_bits(request.spec.choice.index_bits);
  if (request.spec.static_ndrange)
    put(*request.spec.static_ndrange, spec->mutable_static_ndrange());
  if (request.spec.static_workgroup)
    put(*request.spec.static_workgroup, spec->mutable_static_workgroup());
  if (request.spec.static_blocks) put(*request.spec.static_blocks, spec->mutable_static_blocks());
  spec->set_check_bounds(request.spec.check_bounds);
  m.set_key_signature(request.key.signature);
  m.set_device_id(request.key.device_id);
  m.set_key_compiler_options(request.key.compiler_options);
  m.set_toolchain_version(request.key.toolchain_version);
  m.set_source(request.source);
  m.set_options(request.options);
  return m;
}

absl::StatusOr<OwnedCompileRequest> from_message(const wire::Compile& m) {
  OwnedCompileRequest r;
  absl::StatusOr<std::shared_ptr<const Module>> module =
      Module::create(static_cast<ModuleFormat>(m.format()), m.module());
  if (!module.ok()) return module.status();
  r.module = *std::move(module);
  const wire::Signature& sig = m.signature();
  r.signature.entry = sig.entry();
  if (sig.has_static_ndrange()) {
    absl::StatusOr<NdRange> n = get(sig.static_ndrange());
    if (!n.ok()) return n.status();
    r.signature.static_ndrange = *n;
  }
  if (sig.has_static_workgroup()) {
    absl::StatusOr<Dims> d = get(sig.static_workgroup());
    if (!d.ok()) return d.status();
    r.signature.static_workgroup = *d;
  }
  for (const wire::ArgSpec& a : sig.args()) {
    r.signature.args.push_back(
        {static_cast<ArgKind>(a.kind()), static_cast<ScalarType>(a.scalar())});
  }
  r.signature.build_options = sig.build_options();
  const wire::Specialization& spec = m.spec();
  r.spec.choice.rank = static_cast<uint8_t>(spec.rank());
  r.spec.choice.linear = spec.linear();
  r.spec.choice.index_bits = static_cast<uint8_t>(spec.index_bits());
  if (spec.has_static_ndrange()) {
    absl::StatusOr<NdRange> n = get(spec.static_ndrange());
    if (!n.ok()) return n.status();
    r.spec.static_ndrange = *n;
  }
  if (spec.has_static_workgroup()) {
    absl::StatusOr<Dims> d = get(spec.static_workgroup());
    if (!d.ok()) return d.status();
    r.spec.static_workgroup = *d;
  }
  if (spec.has_static_blocks()) {
    absl::StatusOr<Dims> d = get(spec.static_blocks());
    if (!d.ok()) return d.status();
    r.spec.static_blocks = *d;
  }
  r.spec.check_bounds = spec.check_bounds();
  r.key = SpecializationKey{r.module->digest(),
                            r.signature.entry,
                            m.key_signature(),
                            m.device_id(),
                            r.spec,
                            m.key_compiler_options(),
                            m.toolchain_version(),
                            r.signature.build_options};
  r.source = m.source();
  r.options = m.options();
  return r;
}

wire::CompileReply to_reply(const absl::StatusOr<std::unique_ptr<CompiledKernel>>& compiled) {
  wire::CompileReply reply;
  reply.set_code(static_cast<int32_t>(compiled.status().code()));
  if (!compiled.ok()) {
    reply.set_message(std::string(compiled.status().message()));
    return reply;
  }
  const KernelLimits& limits = (*compiled)->limits();
  reply.set_max_workgroup_size(limits.max_workgroup_size);
  reply.set_preferred_multiple(limits.preferred_multiple);
  reply.set_local_memory_bytes(limits.local_memory_bytes);
  if (const std::vector<KernelParameter>* params = (*compiled)->parameters()) {
    reply.set_has_parameters(true);
    for (const KernelParameter& p : *params) {
      wire::KernelParameter* w = reply.add_parameters();
      w->set_space(static_cast<uint32_t>(p.space));
      w->set_is_const(p.is_const);
      w->set_type(p.type);
      w->set_name(p.name);
    }
  }
  return reply;
}

std::string bounded_message(absl::string_view message) {
  if (message.size() <= kMaxWorkerMessageBytes) return std::string(message);
  return absl::StrFormat("%s... (%d bytes more)", message.substr(0, kMaxWorkerMessageBytes),
                         message.size() - kMaxWorkerMessageBytes);
}

absl::StatusOr<CompiledKernelInfo> from_reply(const wire::CompileReply& reply) {
  if (reply.code() < 0 || reply.code() > static_cast<int32_t>(absl::StatusCode::kUnauthenticated)) {
    return absl::InternalError(
        absl::StrFormat("the worker answered a compile with status %d", reply.code()));
  }
  if (reply.code() != 0) {
    return absl::Status(static_cast<absl::StatusCode>(reply.code()),
                        bounded_message(reply.message()));
  }
  CompiledKernelInfo info;
  info.limits.max_workgroup_size = reply.max_workgroup_size();
  info.limits.preferred_multiple = reply.preferred_multiple();
  info.limits.local_memory_bytes = reply.local_memory_bytes();
  // The launch path divides by these and sizes workgroups with them.
  if (info.limits.max_workgroup_size == 0 || info.limits.preferred_multiple == 0 ||
      info.limits.max_workgroup_size > (uint64_t{1} << 32) ||
      info.limits.preferred_multiple > (uint64_t{1} << 32)) {
    return absl::InternalError(absl::StrFormat(
        "the worker reported impossible kernel limits: %d work-items per group, multiple of %d",
        info.limits.max_workgroup_size, info.limits.preferred_multiple));
  }
  if (reply.has_parameters()) {
    if (reply.parameters_size() > static_cast<int>(kMaxKernelArgs) + 1) {
      return absl::InternalError(
          absl::StrFormat("the worker reported %d kernel parameters", reply.parameters_size()));
    }
    std::vector<KernelParameter> params;
    for (const wire::KernelParameter& p : reply.parameters()) {
      if (p.space() > static_cast<uint32_t>(KernelParameter::Space::kLocal)) {
        return absl::InternalError("the worker reported a parameter in no address space");
      }
      if (p.type().size() > kMaxParameterTextBytes || p.name().size() > kMaxParameterTextBytes) {
        return absl::InternalError(
            absl::StrFormat("the worker reported a parameter of %d bytes of type and %d of name",
                            p.type().size(), p.name().size()));
      }
      params.push_back(
          {static_cast<KernelParameter::Space>(p.space()), p.is_const(), p.type(), p.name()});
    }
    info.parameters = std::move(params);
  }
  return info;
}

}  // namespace kad::server::worker
