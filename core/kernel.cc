#include "core/kernel.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "core/build_options.h"
#include "core/kernel_lowering.h"
#include "core/partition.h"

namespace kad {
namespace {

bool is_identifier(absl::string_view s) {
  if (s.empty() || absl::ascii_isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> Kernel::create(std::shared_ptr<const Module> module,
                                                       KernelSignature sig) {
  if (!module) return absl::InvalidArgumentError("kernel has no module");
  if (!is_identifier(sig.entry)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("kernel entry `%s` is not a valid identifier", sig.entry));
  }
  if (sig.args.size() > kMaxKernelArgs) {
    return absl::InvalidArgumentError(
        absl::StrFormat("kernel `%s` declares %d arguments, more than the maximum of %d", sig.entry,
                        sig.args.size(), kMaxKernelArgs));
  }
  for (size_t i = 0; i < sig.args.size(); ++i) {
    const ArgSpec& a = sig.args[i];
    if ((a.kind == ArgKind::kScalar) != (a.scalar != ScalarType::kNone)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("kernel `%s`: argument %d is a %s but names scalar type %s", sig.entry, i,
                          arg_kind_name(a.kind), scalar_type_name(a.scalar)));
    }
  }
  absl::StatusOr<std::string> options = checked_build_options(sig.entry, sig.build_options);
  if (!options.ok()) return options.status();
  sig.build_options = *std::move(options);
  // Static sizes must partition; the launch re-checks nothing of them.
  if (sig.static_ndrange) {
    const Dims none;
    absl::StatusOr<Partition> p = partition_blocks(
        sig.entry, *sig.static_ndrange, sig.static_workgroup ? *sig.static_workgroup : none);
    if (!p.ok()) return p.status();
  } else if (sig.static_workgroup) {
    const Dims& w = *sig.static_workgroup;
    absl::StatusOr<Partition> p = partition_blocks(sig.entry, NdRange(w), w);
    if (!p.ok()) return p.status();
  }
  return std::unique_ptr<Kernel>(new Kernel(std::move(module), std::move(sig)));
}

CompiledKernel* Kernel::find_in_table(const Device& device, const Specialization& spec,
                                      KernelCache& cache) {
  CompiledKernel* found = table_entry(device, spec);
  if (found != nullptr) cache.record_hit(*found);
  return found;
}

CompiledKernel* Kernel::table_entry(const Device& device, const Specialization& spec) {
  absl::MutexLock lock(&mu_);
  return find_locked(device, spec);
}

CompiledKernel* Kernel::find_locked(const Device& device, const Specialization& spec) {
  for (size_t i = 0; i < entry_count_; ++i) {
    const Entry& e = entries_[i];
    if (e.device == &device && e.spec == spec) return e.compiled.get();
  }
  for (const Entry& e : more_entries_)
    if (e.device == &device && e.spec == spec) return e.compiled.get();
  return nullptr;
}

void Kernel::remember(const Device& device, const Specialization& spec,
                      std::shared_ptr<CompiledKernel> compiled) {
  absl::MutexLock lock(&mu_);
  // Another thread may have remembered the same one meanwhile.
  if (find_locked(device, spec) != nullptr) return;
  // Nothing is ever replaced: a launch in flight may still use any entry.
  if (entry_count_ < kInlineEntries) {
    entries_[entry_count_++] = Entry{&device, spec, std::move(compiled)};
  } else {
    more_entries_.push_back(Entry{&device, spec, std::move(compiled)});
  }
}

absl::Status Kernel::check_room(const Device& device) {
  absl::MutexLock lock(&mu_);
  if (entry_count_ + more_entries_.size() < kMaxSpecializations) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrFormat(
      "kernel `%s` holds %d compiled specializations already (static sizes, index widths, "
      "devices; the most one kernel holds), none for this launch on %s: pass sizes "
      "dynamically, or get another kernel",
      signature_.entry, kMaxSpecializations, device.info().id));
}

absl::StatusOr<CompiledKernel*> Kernel::find_specialization(Device& device,
                                                            const Specialization& spec,
                                                            KernelCache& cache) {
  if (CompiledKernel* warm = find_in_table(device, spec, cache)) return warm;
  if (absl::Status room = check_room(device); !room.ok()) return room;
  absl::StatusOr<std::shared_ptr<CompiledKernel>> found = cache.find(key_for(device, spec));
  if (!found.ok()) return found.status();
  if (*found == nullptr) return nullptr;
  remember(device, spec, *std::move(found));
  return table_entry(device, spec);
}

SpecializationKey Kernel::key_for(const Device& device, const Specialization& spec) const {
  const DeviceInfo& info = device.info();
  SpecializationKey key;
  key.module_digest = module_->digest();
  key.entry = signature_.entry;
  key.signature = signature_text(signature_);
  key.device_id = info.id;
  key.spec = spec;
  key.compiler_options = signature_.build_options;
  key.build_options = signature_.build_options;
  const std::string backend_options = device.compiler_options(signature_, spec);
  if (!backend_options.empty()) key.compiler_options += " " + backend_options;
  key.toolchain_version = info.toolchain_version + " / " + info.driver_version;
  return key;
}

absl::StatusOr<CompiledKernel*> Kernel::specialization(Device& device, const Specialization& spec,
                                                       KernelCache& cache, bool* compiled) {
  *compiled = false;
  if (CompiledKernel* warm = find_in_table(device, spec, cache)) return warm;
  if (absl::Status room = check_room(device); !room.ok()) return room;
  const SpecializationKey key = key_for(device, spec);
  absl::StatusOr<std::shared_ptr<CompiledKernel>> result =
      cache.get_or_compile(key, [&]() -> absl::StatusOr<std::unique_ptr<CompiledKernel>> {
        *compiled = true;
        CompileRequest request{*module_,
                               signature_,
                               spec,
                               key,
                               module_->format() == ModuleFormat::kOpenClC
                                   ? specialised_source(spec, module_->bytes())
                                   : std::string(),
                               key.compiler_options};
        absl::StatusOr<std::unique_ptr<CompiledKernel>> compiled = device.compile(request);
        KernelLowering& lowering = KernelLowering::shared();
        if (compiled.ok() && lowering.prelowering()) lowering.prelower(request);
        return compiled;
      });
  if (!result.ok()) return result.status();
  remember(device, spec, *std::move(result));
  // The table's entry: this one, or the same key another thread remembered first.
  return table_entry(device, spec);
}

absl::Status validate_args(const KernelSignature& sig, std::span<const KernelArg> args,
                           const Device& device) {
  if (args.size() != sig.args.size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("kernel `%s` takes %d arguments, the launch gave %d", sig.entry,
                        sig.args.size(), args.size()));
  }
  uint64_t local_total = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    const ArgSpec& want = sig.args[i];
    const KernelArg& got = args[i];
    const bool got_buffer = got.kind == ArgKind::kBuffer || got.kind == ArgKind::kConstBuffer;
    const bool want_buffer = want.kind == ArgKind::kBuffer || want.kind == ArgKind::kConstBuffer;
    const bool kind_ok = want_buffer ? got_buffer : got.kind == want.kind;
    if (!kind_ok || (want.kind == ArgKind::kScalar && got.scalar != want.scalar)) {
      ArgSpec given{got.kind, got.scalar};
      return absl::InvalidArgumentError(
          absl::StrFormat("kernel `%s`: argument %d must be a %s, the launch gave a %s", sig.entry,
                          i, to_string(want), to_string(given)));
    }
    if (want_buffer) {
      if (got.buffer == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrFormat("kernel `%s`: argument %d is a null buffer", sig.entry, i));
      }
      if (&got.buffer->device() != &device) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "kernel `%s`: argument %d is a buffer on device %s, the launch runs on %s", sig.entry,
            i, got.buffer->device().info().id, device.info().id));
      }
    }
    if (want.kind == ArgKind::kLocal) {
      if (got.local_bytes == 0) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "kernel `%s`: argument %d asks for 0 bytes of local memory", sig.entry, i));
      }
      // Summed without wrapping: two huge sizes must not add up to a small one.
      if (__builtin_add_overflow(local_total, got.local_bytes, &local_total)) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "kernel `%s`: argument %d's %d bytes of local memory overflow the launch's total",
            sig.entry, i, got.local_bytes));
      }
    }
  }
  if (local_total > device.info().limits.local_memory_bytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("kernel `%s`: %d bytes of local memory requested, the device has %d",
                        sig.entry, local_total, device.info().limits.local_memory_bytes));
  }
  // A const buffer is `restrict`: no written argument may alias it.
  for (size_t i = 0; i < args.size(); ++i) {
    if (sig.args[i].kind != ArgKind::kConstBuffer) continue;
    for (size_t j = 0; j < args.size(); ++j) {
      if (sig.args[j].kind == ArgKind::kBuffer && args[j].buffer == args[i].buffer) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "kernel `%s`: const buffer argument %d is also passed as written argument %d",
            sig.entry, i, j));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace kad
