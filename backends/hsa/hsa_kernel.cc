#include "backends/hsa/hsa_kernel.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "backends/hsa/hsa_status.h"
#include "core/driver_scope.h"

namespace kad::hsa {
namespace {

// Scratch per work-item for a kernel whose stack the compiler could not
// bound (recursion, calls through pointers): HIP's default stack size.
constexpr uint32_t kDynamicStackBytes = 1024;

}  // namespace

KernelLimits kernel_limits(const KernelMetadata& kernel, const DeviceLimits& device) {
  KernelLimits limits;
  limits.max_workgroup_size = std::max<uint64_t>(
      1, std::min<uint64_t>(kernel.max_flat_workgroup_size, device.max_workgroup_size));
  limits.preferred_multiple = std::max<uint64_t>(
      1, kernel.wavefront_size != 0 ? kernel.wavefront_size : device.subgroup_width);
  limits.local_memory_bytes = kernel.group_segment_fixed_size;
  return limits;
}

uint64_t choose_workgroup_size(const KernelLimits& limits, uint64_t nitems, uint64_t max_items) {
  const uint64_t cap = std::max<uint64_t>(1, std::min(limits.max_workgroup_size, max_items));
  const uint64_t wave = std::max<uint64_t>(1, limits.preferred_multiple);
  const uint64_t needed = (std::max<uint64_t>(nitems, 1) + wave - 1) / wave * wave;
  const uint64_t items = std::min(cap, needed);
  return items >= wave ? items / wave * wave : items;
}

absl::StatusOr<std::unique_ptr<HsaKernel>> HsaKernel::load(HsaDevice& device,
                                                           std::string code_object,
                                                           const KernelSignature& signature) {
  absl::StatusOr<CodeObjectMetadata> metadata = read_code_object_metadata(code_object);
  if (!metadata.ok()) {
    return absl::Status(
        metadata.status().code(),
        absl::StrFormat("kernel `%s`: %s", signature.entry, metadata.status().message()));
  }
  const absl::string_view processor = target_processor(metadata->target);
  if (processor != device.processor()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "kernel `%s`: the code object targets %s (%s), device %s is %s", signature.entry, processor,
        metadata->target, device.info().id, device.isa()));
  }
  const KernelMetadata* kernel = metadata->find_kernel(signature.entry);
  if (kernel == nullptr) {
    return absl::NotFoundError(absl::StrFormat("module has no kernel named `%s`", signature.entry));
  }
  absl::StatusOr<KernargLayout> layout = make_kernarg_layout(*kernel, signature);
  if (!layout.ok()) return layout.status();
  if (layout->size > kKernargSlotBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("kernel `%s`: its kernarg segment of %d bytes exceeds the hsa backend's %d",
                        signature.entry, layout->size, kKernargSlotBytes));
  }

  std::unique_ptr<HsaKernel> k(new HsaKernel(device));
  k->code_object_ = std::move(code_object);
  k->layout_ = *std::move(layout);
  k->limits_ = kernel_limits(*kernel, device.info().limits);
  k->private_segment_size_ =
      kernel->private_segment_fixed_size + (kernel->uses_dynamic_stack ? kDynamicStackBytes : 0);

  const HsaApi& api = device.api();
  hsa_agent_t agent = device.agent();
  DriverScope driver;
  if (absl::Status s = hsa_status(api.hsa_code_object_reader_create_from_memory(
                                      k->code_object_.data(), k->code_object_.size(), &k->reader_),
                                  "hsa_code_object_reader_create_from_memory", signature.entry);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = hsa_status(
          api.hsa_executable_create_alt(device.profile(), HSA_DEFAULT_FLOAT_ROUNDING_MODE_DEFAULT,
                                        nullptr, &k->executable_),
          "hsa_executable_create_alt", signature.entry);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          hsa_status(api.hsa_executable_load_agent_code_object(k->executable_, agent, k->reader_,
                                                               nullptr, nullptr),
                     "hsa_executable_load_agent_code_object",
                     absl::StrFormat("kernel `%s` for %s", signature.entry, device.isa()));
      !s.ok()) {
    return s;
  }
  if (absl::Status s = hsa_status(api.hsa_executable_freeze(k->executable_, nullptr),
                                  "hsa_executable_freeze", signature.entry);
      !s.ok()) {
    return s;
  }
  hsa_executable_symbol_t symbol{};
  if (absl::Status s = hsa_status(api.hsa_executable_get_symbol_by_name(
                                      k->executable_, kernel->symbol.c_str(), &agent, &symbol),
                                  "hsa_executable_get_symbol_by_name", kernel->symbol);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          hsa_status(api.hsa_executable_symbol_get_info(
                         symbol, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT, &k->kernel_object_),
                     "hsa_executable_symbol_get_info(KERNEL_OBJECT)", kernel->symbol);
      !s.ok()) {
    return s;
  }
  return k;
}

HsaKernel::~HsaKernel() {
  const HsaApi& api = device_.api();
  DriverScope driver;
  if (executable_.handle != 0) api.hsa_executable_destroy(executable_);
  if (reader_.handle != 0) api.hsa_code_object_reader_destroy(reader_);
}

}  // namespace kad::hsa
