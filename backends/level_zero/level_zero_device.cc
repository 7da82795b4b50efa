#include "backends/level_zero/level_zero_device.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backends/level_zero/level_zero_buffer.h"
#include "backends/level_zero/level_zero_kernel.h"
#include "backends/level_zero/level_zero_queue.h"
#include "backends/level_zero/level_zero_status.h"
#include "core/driver_scope.h"
#include "core/kernel_lowering.h"

namespace kad::level_zero {
namespace {

// Device memory alignment: enough for any OpenCL C type (double16, long16).
constexpr size_t kAlignment = 128;

// The first command queue group with compute engines.
absl::StatusOr<uint32_t> find_compute_ordinal(const LevelZeroApi& api, ze_device_handle_t dev) {
  uint32_t count = 0;
  if (absl::Status s = ze_status(api.zeDeviceGetCommandQueueGroupProperties(dev, &count, nullptr),
                                 "zeDeviceGetCommandQueueGroupProperties");
      !s.ok()) {
    return s;
  }
  std::vector<ze_command_queue_group_properties_t> groups(count);
  for (auto& g : groups) g.stype = ZE_STRUCTURE_TYPE_COMMAND_QUEUE_GROUP_PROPERTIES;
  if (absl::Status s =
          ze_status(api.zeDeviceGetCommandQueueGroupProperties(dev, &count, groups.data()),
                    "zeDeviceGetCommandQueueGroupProperties");
      !s.ok()) {
    return s;
  }
  for (uint32_t i = 0; i < count; ++i) {
    if (groups[i].flags & ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE) return i;
  }
  return absl::UnavailableError("the device has no command queue group with compute engines");
}

// Total memory of every kind the device reports (HBM and others).
absl::StatusOr<uint64_t> memory_size(const LevelZeroApi& api, ze_device_handle_t dev) {
  uint32_t count = 0;
  if (absl::Status s = ze_status(api.zeDeviceGetMemoryProperties(dev, &count, nullptr),
                                 "zeDeviceGetMemoryProperties");
      !s.ok()) {
    return s;
  }
  std::vector<ze_device_memory_properties_t> memories(count);
  for (auto& m : memories) m.stype = ZE_STRUCTURE_TYPE_DEVICE_MEMORY_PROPERTIES;
  if (absl::Status s = ze_status(api.zeDeviceGetMemoryProperties(dev, &count, memories.data()),
                                 "zeDeviceGetMemoryProperties");
      !s.ok()) {
    return s;
  }
  uint64_t total = 0;
  for (uint32_t i = 0; i < count; ++i) total += memories[i].totalSize;
  return total;
}

std::string vendor_name(uint32_t vendor_id) {
  if (vendor_id == 0x8086) return "Intel";
  return absl::StrFormat("PCI vendor 0x%04x", vendor_id);
}

// Fills everything but the id and the backend from the driver's properties.
absl::Status query_info(const LevelZeroApi& api, ze_driver_handle_t driver, ze_device_handle_t dev,
                        DeviceInfo* info) {
  ze_device_properties_t props{};
  props.stype = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES;
  ze_device_compute_properties_t compute{};
  compute.stype = ZE_STRUCTURE_TYPE_DEVICE_COMPUTE_PROPERTIES;
  ze_device_module_properties_t module{};
  module.stype = ZE_STRUCTURE_TYPE_DEVICE_MODULE_PROPERTIES;
  ze_driver_properties_t driver_props{};
  driver_props.stype = ZE_STRUCTURE_TYPE_DRIVER_PROPERTIES;
  ze_api_version_t api_version{};
  for (auto [result, call] :
       {std::pair{api.zeDeviceGetProperties(dev, &props), "zeDeviceGetProperties"},
        {api.zeDeviceGetComputeProperties(dev, &compute), "zeDeviceGetComputeProperties"},
        {api.zeDeviceGetModuleProperties(dev, &module), "zeDeviceGetModuleProperties"},
        {api.zeDriverGetProperties(driver, &driver_props), "zeDriverGetProperties"},
        {api.zeDriverGetApiVersion(driver, &api_version), "zeDriverGetApiVersion"}}) {
    if (absl::Status s = ze_status(result, call); !s.ok()) return s;
  }
  absl::StatusOr<uint64_t> memory = memory_size(api, dev);
  if (!memory.ok()) return memory.status();

  info->name.assign(props.name, strnlen(props.name, sizeof(props.name)));
  info->vendor = vendor_name(props.vendorId);
  info->platform = absl::StrFormat("Level Zero %d.%d", ZE_MAJOR_VERSION(api_version),
                                   ZE_MINOR_VERSION(api_version));
  info->driver_version =
      absl::StrFormat("%d (0x%08x)", driver_props.driverVersion, driver_props.driverVersion);
  // The driver builds SPIR-V that kad's toolchain made: both are in the key.
  info->toolchain_version = absl::StrFormat("%s; SPIR-V %d.%d", KernelLowering::shared().version(),
                                            ZE_MAJOR_VERSION(module.spirvVersionSupported),
                                            ZE_MINOR_VERSION(module.spirvVersionSupported));
  info->is_cpu = props.type == ZE_DEVICE_TYPE_CPU;
  // Device memory (zeMemAllocDevice) is never host memory kad could share
  // with a client, even on an integrated GPU.
  info->host_visible = false;
  info->formats = {ModuleFormat::kOpenClC, ModuleFormat::kSpirv, ModuleFormat::kLlvmBitcodeSpir64};

  DeviceLimits& limits = info->limits;
  limits.max_workgroup_size = compute.maxTotalGroupSize;
  limits.max_workgroup_dims = {compute.maxGroupSizeX, compute.maxGroupSizeY, compute.maxGroupSizeZ};
  limits.max_groups = {compute.maxGroupCountX, compute.maxGroupCountY, compute.maxGroupCountZ};
  limits.compute_units = std::max<uint64_t>(
      1, uint64_t{props.numSlices} * props.numSubslicesPerSlice * props.numEUsPerSubslice);
  // The widest subgroup the device runs: what its compiler picks for the
  // kernels that matter (the others fit it too).
  uint32_t widest = 1;
  for (uint32_t i = 0; i < std::min<uint32_t>(compute.numSubGroupSizes, ZE_SUBGROUPSIZE_COUNT);
       ++i) {
    widest = std::max(widest, compute.subGroupSizes[i]);
  }
  limits.subgroup_width = widest;
  limits.global_memory_bytes = *memory;
  limits.max_allocation_bytes = props.maxMemAllocSize;
  limits.local_memory_bytes = compute.maxSharedLocalMemory;
  limits.max_parameter_bytes = module.maxArgumentsSize;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<LevelZeroDevice>> LevelZeroDevice::create(
    std::shared_ptr<const LevelZeroApi> api, ze_driver_handle_t driver, ze_device_handle_t device,
    std::string id) {
  std::unique_ptr<LevelZeroDevice> dev(new LevelZeroDevice(api, device));
  DeviceInfo& info = dev->info_;
  info.backend = "level_zero";
  info.id = std::move(id);
  DriverScope scope;
  if (absl::Status s = query_info(*api, driver, device, &info); !s.ok()) return s;
  absl::StatusOr<uint32_t> ordinal = find_compute_ordinal(*api, device);
  if (!ordinal.ok()) return ordinal.status();
  dev->compute_ordinal_ = *ordinal;

  ze_context_desc_t context_desc{};
  context_desc.stype = ZE_STRUCTURE_TYPE_CONTEXT_DESC;
  if (absl::Status s = ze_status(api->zeContextCreate(driver, &context_desc, &dev->context_),
                                 "zeContextCreate", info.name);
      !s.ok()) {
    dev->context_ = nullptr;
    return s;
  }
  return dev;
}

LevelZeroDevice::~LevelZeroDevice() {
  if (context_) api_->zeContextDestroy(context_);
}

// Fresh device memory may hold what another session freed (DESIGN §8): filled
// with zeros through a synchronous immediate command list of its own.
absl::Status LevelZeroDevice::zero(void* address, uint64_t bytes) {
  ze_command_queue_desc_t desc{};
  desc.stype = ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC;
  desc.ordinal = compute_ordinal();
  desc.mode = ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS;
  desc.priority = ZE_COMMAND_QUEUE_PRIORITY_NORMAL;
  DriverScope scope;
  ze_command_list_handle_t list = nullptr;
  if (absl::Status s =
          ze_status(api_->zeCommandListCreateImmediate(context_, device_, &desc, &list),
                    "zeCommandListCreateImmediate", absl::StrCat("zeroing memory on ", info_.id));
      !s.ok())
    return s;
  const uint8_t pattern = 0;
  const ze_result_t r = api_->zeCommandListAppendMemoryFill(
      list, address, &pattern, sizeof(pattern), bytes, nullptr, 0, nullptr);
  api_->zeCommandListDestroy(list);
  return ze_status(r, "zeCommandListAppendMemoryFill",
                   absl::StrCat("zeroing ", bytes, " bytes on ", info_.id));
}

absl::StatusOr<std::unique_ptr<Buffer>> LevelZeroDevice::allocate(uint64_t bytes) {
  if (absl::Status s = check_allocation(info_, bytes); !s.ok()) return s;
  ze_device_mem_alloc_desc_t desc{};
  desc.stype = ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC;
  desc.ordinal = 0;
  void* address = nullptr;
  ze_result_t r;
  {
    DriverScope scope;
    r = api_->zeMemAllocDevice(context_, &desc, bytes, kAlignment, device_, &address);
  }
  if (r != ZE_RESULT_SUCCESS) {
    return ze_status(r, "zeMemAllocDevice", absl::StrCat(bytes, " bytes on ", info_.id));
  }
  auto buffer = std::make_unique<LevelZeroBuffer>(*this, address, bytes);
  if (absl::Status s = zero(address, bytes); !s.ok()) return s;
  return buffer;
}

absl::StatusOr<std::unique_ptr<Queue>> LevelZeroDevice::create_queue() {
  absl::StatusOr<std::unique_ptr<LevelZeroQueue>> q = LevelZeroQueue::create(*this);
  if (!q.ok()) return q.status();
  return std::unique_ptr<Queue>(std::move(*q));
}

absl::StatusOr<std::unique_ptr<CompiledKernel>> LevelZeroDevice::compile(
    const CompileRequest& request) {
  const ModuleFormat format = request.module.format();
  if (std::find(info_.formats.begin(), info_.formats.end(), format) == info_.formats.end()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "kernel `%s`: device %s (%s) consumes OpenCL C, SPIR-V or spir64 LLVM bitcode, not %s",
        request.signature.entry, info_.id, info_.name, module_format_name(format)));
  }
  absl::StatusOr<std::string> spirv =
      KernelLowering::shared().lower(request, CodeTarget::kSpirv, "");
  if (!spirv.ok()) {
    return absl::Status(spirv.status().code(), absl::StrFormat("%s (%s): %s", info_.id, info_.name,
                                                               spirv.status().message()));
  }
  absl::StatusOr<std::unique_ptr<LevelZeroKernel>> k =
      LevelZeroKernel::build(*this, request, *spirv);
  if (!k.ok()) return k.status();
  return std::unique_ptr<CompiledKernel>(std::move(*k));
}

}  // namespace kad::level_zero
