#include "backends/hsa/hsa_kernarg.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"

namespace kad::hsa {
namespace {

bool is_power_of_two(uint64_t n) { return n != 0 && (n & (n - 1)) == 0; }

// Writes the low `size` bytes of `value`, little end first (the device's order).
void put(std::span<std::byte> out, uint32_t offset, uint32_t size, uint64_t value) {
  std::memcpy(out.data() + offset, &value, std::min<size_t>(size, sizeof(value)));
}

std::string describe(const ArgMetadata& arg) {
  return absl::StrFormat("`%s` (%s%s, %d bytes)", arg.type_name.empty() ? "?" : arg.type_name,
                         arg.is_const ? "const " : "", arg.value_kind, arg.size);
}

// Whether the kernel's parameter `got` can take an argument declared `want`.
bool matches(const ArgSpec& want, const ArgMetadata& got) {
  switch (want.kind) {
    case ArgKind::kBuffer:
      return got.kind == ArgValueKind::kGlobalBuffer && got.size == sizeof(uint64_t);
    case ArgKind::kConstBuffer:
      return got.kind == ArgValueKind::kGlobalBuffer && got.size == sizeof(uint64_t) &&
             (got.is_const || got.address_space == "constant");
    case ArgKind::kScalar:
      return got.kind == ArgValueKind::kByValue && got.size == scalar_type_size(want.scalar) &&
             (got.type_name.empty() || got.type_name == scalar_type_name(want.scalar));
    case ArgKind::kLocal:
      return got.kind == ArgValueKind::kDynamicSharedPointer &&
             (got.size == sizeof(uint32_t) || got.size == sizeof(uint64_t));
  }
  return false;
}

}  // namespace

absl::StatusOr<KernargLayout> make_kernarg_layout(const KernelMetadata& kernel,
                                                  const KernelSignature& signature) {
  KernargLayout layout;
  layout.kernel = kernel.name;
  layout.size = kernel.kernarg_segment_size;
  layout.group_segment_fixed = kernel.group_segment_fixed_size;

  std::vector<const ArgMetadata*> explicit_args;
  for (const ArgMetadata& arg : kernel.args) {
    if (!is_hidden(arg.kind)) {
      explicit_args.push_back(&arg);
      continue;
    }
    switch (arg.kind) {
      case ArgValueKind::kHiddenPrintfBuffer:
        return absl::InvalidArgumentError(absl::StrFormat(
            "kernel `%s` calls printf, which the hsa backend does not support", kernel.name));
      case ArgValueKind::kHiddenOther:
      case ArgValueKind::kHiddenGlobalOffsetX:
      case ArgValueKind::kHiddenGlobalOffsetY:
      case ArgValueKind::kHiddenGlobalOffsetZ:
        break;  // zero
      default:
        layout.hidden.push_back({arg.offset, arg.size, arg.kind});
    }
  }

  if (explicit_args.size() != signature.args.size() + 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "kernel `%s` has %d parameters after KAD_CONTEXT, its signature declares %d", kernel.name,
        explicit_args.empty() ? 0 : explicit_args.size() - 1, signature.args.size()));
  }
  const ArgMetadata& context = *explicit_args[0];
  if (context.kind != ArgValueKind::kByValue || context.size != sizeof(LaunchContext)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "kernel `%s`: the first parameter must be KAD_CONTEXT (%d bytes by value), not %s",
        kernel.name, sizeof(LaunchContext), describe(context)));
  }
  layout.context_offset = context.offset;
  for (size_t i = 0; i < signature.args.size(); ++i) {
    const ArgSpec& want = signature.args[i];
    const ArgMetadata& got = *explicit_args[i + 1];
    if (got.kind == ArgValueKind::kOther) {
      return absl::InvalidArgumentError(
          absl::StrFormat("kernel `%s`: argument %d is of kind `%s`, which kad cannot pass",
                          kernel.name, i, got.value_kind));
    }
    if (!matches(want, got)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("kernel `%s`: argument %d is declared a %s but the kernel's parameter "
                          "is %s",
                          kernel.name, i, to_string(want), describe(got)));
    }
    KernargSlot slot;
    slot.offset = got.offset;
    slot.size = got.size;
    slot.kind = want.kind;
    slot.align = std::max(kLocalAlignment, got.pointee_align);
    if (want.kind == ArgKind::kLocal && !is_power_of_two(slot.align)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("kernel `%s`: argument %d has pointee alignment %d, not a power of two",
                          kernel.name, i, got.pointee_align));
    }
    layout.args.push_back(slot);
  }
  return layout;
}

absl::StatusOr<uint32_t> pack_kernargs(const KernargLayout& layout, const LaunchContext& context,
                                       std::span<const KernelArg> args,
                                       const LaunchGeometry& geometry, BufferAddress address_of,
                                       std::span<std::byte> out) {
  if (out.size() < layout.size) {
    return absl::InternalError(
        absl::StrFormat("kernel `%s`: its kernarg segment of %d bytes does not fit in %d",
                        layout.kernel, layout.size, out.size()));
  }
  if (args.size() != layout.args.size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("kernel `%s` takes %d arguments, the launch gave %d", layout.kernel,
                        layout.args.size(), args.size()));
  }
  std::memset(out.data(), 0, layout.size);
  std::memcpy(out.data() + layout.context_offset, &context, sizeof(context));

  uint64_t group_bytes = layout.group_segment_fixed;
  for (size_t i = 0; i < args.size(); ++i) {
    const KernargSlot& slot = layout.args[i];
    const KernelArg& arg = args[i];
    switch (slot.kind) {
      case ArgKind::kBuffer:
      case ArgKind::kConstBuffer:
        put(out, slot.offset, slot.size, address_of(arg.buffer));
        break;
      case ArgKind::kScalar:
        put(out, slot.offset, slot.size, arg.bits);
        break;
      case ArgKind::kLocal:
        group_bytes = (group_bytes + slot.align - 1) & ~uint64_t{slot.align - 1};
        put(out, slot.offset, slot.size, group_bytes);
        group_bytes += arg.local_bytes;
        break;
    }
  }
  if (group_bytes > UINT32_MAX) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "kernel `%s`: %d bytes of group memory requested", layout.kernel, group_bytes));
  }

  for (const HiddenSlot& h : layout.hidden) {
    uint64_t value = 0;
    switch (h.kind) {
      case ArgValueKind::kHiddenBlockCountX:
      case ArgValueKind::kHiddenBlockCountY:
      case ArgValueKind::kHiddenBlockCountZ:
        value = geometry.groups[static_cast<int>(h.kind) -
                                static_cast<int>(ArgValueKind::kHiddenBlockCountX)];
        break;
      case ArgValueKind::kHiddenGroupSizeX:
      case ArgValueKind::kHiddenGroupSizeY:
      case ArgValueKind::kHiddenGroupSizeZ:
        value = geometry.items[static_cast<int>(h.kind) -
                               static_cast<int>(ArgValueKind::kHiddenGroupSizeX)];
        break;
      case ArgValueKind::kHiddenGridDims:
        value = 3;  // kad always dispatches three dimensions
        break;
      case ArgValueKind::kHiddenDynamicLdsSize:
        value = group_bytes - layout.group_segment_fixed;
        break;
      default:
        value = 0;  // remainders: the grid is whole groups in every dimension
    }
    put(out, h.offset, h.size, value);
  }
  return static_cast<uint32_t>(group_bytes);
}

}  // namespace kad::hsa
