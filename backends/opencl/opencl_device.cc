#include "backends/opencl/opencl_device.h"

#include <algorithm>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "backends/opencl/opencl_buffer.h"
#include "backends/opencl/opencl_info.h"
#include "backends/opencl/opencl_kernel.h"
#include "backends/opencl/opencl_queue.h"
#include "backends/opencl/opencl_status.h"
#include "core/driver_scope.h"
#include "core/kernel_lowering.h"

namespace kad::opencl {
namespace {

template <typename T>
absl::StatusOr<T> device_value(const OpenClApi& api, cl_device_id device, cl_device_info what) {
  T value{};
  if (absl::Status s = cl_status(api.clGetDeviceInfo(device, what, sizeof(T), &value, nullptr),
                                 "clGetDeviceInfo");
      !s.ok()) {
    return s;
  }
  return value;
}

// PoCL's CPU devices count a launch's work-groups in an `unsigned` (the
// pthread scheduler's remaining_wgs, the basic device's loop): more than
// 2^32-1 groups wrap and abort PoCL inside its scheduler.
constexpr uint64_t kPoclMaxTotalGroups = 0xFFFFFFFFu;

absl::Status query_limits(const OpenClApi& api, cl_device_id dev, bool pocl, DeviceLimits* limits) {
  absl::StatusOr<size_t> wg = device_value<size_t>(api, dev, CL_DEVICE_MAX_WORK_GROUP_SIZE);
  absl::StatusOr<cl_uint> dims =
      device_value<cl_uint>(api, dev, CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS);
  absl::StatusOr<cl_uint> units = device_value<cl_uint>(api, dev, CL_DEVICE_MAX_COMPUTE_UNITS);
  absl::StatusOr<cl_ulong> global = device_value<cl_ulong>(api, dev, CL_DEVICE_GLOBAL_MEM_SIZE);
  absl::StatusOr<cl_ulong> alloc = device_value<cl_ulong>(api, dev, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
  absl::StatusOr<cl_ulong> local = device_value<cl_ulong>(api, dev, CL_DEVICE_LOCAL_MEM_SIZE);
  absl::StatusOr<size_t> params = device_value<size_t>(api, dev, CL_DEVICE_MAX_PARAMETER_SIZE);
  for (const absl::Status& s : {wg.status(), dims.status(), units.status(), global.status(),
                                alloc.status(), local.status(), params.status()}) {
    if (!s.ok()) return s;
  }
  std::vector<size_t> sizes(std::max<cl_uint>(*dims, 3), 1);
  if (absl::Status s = cl_status(api.clGetDeviceInfo(dev, CL_DEVICE_MAX_WORK_ITEM_SIZES,
                                                     sizeof(size_t) * *dims, sizes.data(), nullptr),
                                 "clGetDeviceInfo(CL_DEVICE_MAX_WORK_ITEM_SIZES)");
      !s.ok()) {
    return s;
  }
  limits->max_workgroup_size = *wg;
  for (size_t d = 0; d < 3; ++d) limits->max_workgroup_dims[d] = d < *dims ? sizes[d] : 1;
  // OpenCL bounds the global size (a size_t), not the number of groups; PoCL
  // bounds the number of groups in all.
  limits->max_groups = {kUnlimited, kUnlimited, kUnlimited};
  if (pocl) {
    limits->max_total_groups = kPoclMaxTotalGroups;
    for (uint64_t& g : limits->max_groups) g = kPoclMaxTotalGroups;
  }
  limits->compute_units = *units;
  limits->subgroup_width = 1;
  limits->global_memory_bytes = *global;
  limits->max_allocation_bytes = *alloc;
  limits->local_memory_bytes = *local;
  limits->max_parameter_bytes = *params;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<OpenClDevice>> OpenClDevice::create(
    std::shared_ptr<const OpenClApi> api, cl_platform_id platform, cl_device_id device,
    std::string id, bool timed_queues) {
  std::unique_ptr<OpenClDevice> dev(new OpenClDevice(api, device));
  dev->timed_queues_ = timed_queues;
  DeviceInfo& info = dev->info_;
  info.backend = "opencl";
  info.id = std::move(id);
  info.name = query_string(api->clGetDeviceInfo, device, CL_DEVICE_NAME);
  info.vendor = query_string(api->clGetDeviceInfo, device, CL_DEVICE_VENDOR);
  info.platform = query_string(api->clGetPlatformInfo, platform, CL_PLATFORM_NAME);
  info.driver_version =
      absl::StrCat(query_string(api->clGetPlatformInfo, platform, CL_PLATFORM_VERSION), "; ",
                   query_string(api->clGetDeviceInfo, device, CL_DRIVER_VERSION));
  info.toolchain_version =
      absl::StrCat(query_string(api->clGetDeviceInfo, device, CL_DEVICE_VERSION), "; ",
                   query_string(api->clGetDeviceInfo, device, CL_DEVICE_OPENCL_C_VERSION));
  absl::StatusOr<cl_device_type> type = device_value<cl_device_type>(*api, device, CL_DEVICE_TYPE);
  if (!type.ok()) return type.status();
  info.is_cpu = (*type & CL_DEVICE_TYPE_CPU) != 0;
  absl::StatusOr<cl_bool> unified =
      device_value<cl_bool>(*api, device, CL_DEVICE_HOST_UNIFIED_MEMORY);
  info.host_visible = info.is_cpu && unified.ok() && *unified;
  // cl_khr_spir: SPIR 1.2 bitcode, which kad links IR modules into
  // (KernelLowering, CodeTarget::kSpir).
  const std::string extensions = query_string(api->clGetDeviceInfo, device, CL_DEVICE_EXTENSIONS);
  const std::vector<absl::string_view> names = absl::StrSplit(extensions, ' ', absl::SkipEmpty());
  dev->spir_ = absl::c_linear_search(names, "cl_khr_spir");
  info.formats = {ModuleFormat::kOpenClC};
  if (dev->spir_) {
    info.formats.push_back(ModuleFormat::kSpirv);
    info.formats.push_back(ModuleFormat::kLlvmBitcodeSpir64);
  }
  const bool pocl = absl::StrContains(info.platform, "Portable Computing Language");
  if (absl::Status s = query_limits(*api, device, pocl, &info.limits); !s.ok()) return s;

  cl_context_properties props[] = {CL_CONTEXT_PLATFORM,
                                   reinterpret_cast<cl_context_properties>(platform), 0};
  cl_int err = CL_SUCCESS;
  dev->context_ = api->clCreateContext(props, 1, &device, nullptr, nullptr, &err);
  if (absl::Status s = cl_status(err, "clCreateContext", info.name); !s.ok()) return s;
  return dev;
}

OpenClDevice::~OpenClDevice() {
  {
    absl::MutexLock lock(&zero_mu_);
    if (zero_queue_) api_->clReleaseCommandQueue(zero_queue_);
  }
  if (context_) api_->clReleaseContext(context_);
}

absl::Status OpenClDevice::zero(cl_mem mem, uint64_t bytes) {
  absl::MutexLock lock(&zero_mu_);
  DriverScope scope;
  cl_int err = CL_SUCCESS;
  if (zero_queue_ == nullptr) {
    zero_queue_ = api_->clCreateCommandQueue(context_, device_, 0, &err);
    if (absl::Status s = cl_status(err, "clCreateCommandQueue", info_.id); !s.ok()) {
      zero_queue_ = nullptr;
      return s;
    }
  }
  const cl_uchar pattern = 0;
  err = api_->clEnqueueFillBuffer(zero_queue_, mem, &pattern, sizeof(pattern), 0, bytes, 0, nullptr,
                                  nullptr);
  if (absl::Status s = cl_status(err, "clEnqueueFillBuffer", absl::StrCat(bytes, " zero bytes"));
      !s.ok())
    return s;
  return cl_status(api_->clFinish(zero_queue_), "clFinish", "zeroing a new buffer");
}

absl::StatusOr<std::unique_ptr<Buffer>> OpenClDevice::create_buffer(cl_mem_flags flags, void* host,
                                                                    uint64_t bytes) {
  if (absl::Status s = check_allocation(info_, bytes); !s.ok()) return s;
  cl_int err = CL_SUCCESS;
  cl_mem mem;
  {
    DriverScope scope;
    mem = api_->clCreateBuffer(context_, flags, bytes, host, &err);
  }
  if (absl::Status s = cl_status(err, "clCreateBuffer", absl::StrCat(bytes, " bytes")); !s.ok())
    return s;
  auto buffer = std::make_unique<OpenClBuffer>(*this, mem, bytes);
  // Imported host memory is the caller's, and already zero where it is new.
  if (host == nullptr) {
    if (absl::Status s = zero(mem, bytes); !s.ok()) return s;
  }
  return buffer;
}

absl::StatusOr<std::unique_ptr<Buffer>> OpenClDevice::allocate(uint64_t bytes) {
  return create_buffer(CL_MEM_READ_WRITE, nullptr, bytes);
}

absl::StatusOr<std::unique_ptr<Buffer>> OpenClDevice::import_host_memory(
    const HostMemoryRef& host) {
  if (!info_.host_visible) return Device::import_host_memory(host);
  // On a host-unified device, CL_MEM_USE_HOST_PTR computes on this memory itself.
  return create_buffer(CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, host.data, host.bytes);
}

absl::StatusOr<std::unique_ptr<Queue>> OpenClDevice::create_queue() {
  absl::StatusOr<std::unique_ptr<OpenClQueue>> q = OpenClQueue::create(*this);
  if (!q.ok()) return q.status();
  return std::unique_ptr<Queue>(std::move(*q));
}

absl::StatusOr<std::optional<std::string>> OpenClDevice::lowered_spir(
    const CompileRequest& request) const {
  const ModuleFormat format = request.module.format();
  KernelLowering& lowering = KernelLowering::shared();
  switch (format) {
    case ModuleFormat::kOpenClC: {
      // A client's source is compiled out of this process (DESIGN §8): by
      // kad's toolchain, in a confined child under time and memory limits,
      // to SPIR that the driver takes. A driver without cl_khr_spir, or a kad
      // without toolchain, compiles it here, behind check_opencl_source alone.
      if (!spir_ || !lowering.toolchain_status().ok()) return std::nullopt;
      absl::StatusOr<std::string> spir = lowering.lower(request, CodeTarget::kSpir, "");
      if (!spir.ok()) {
        return absl::Status(
            spir.status().code(),
            absl::StrFormat("kernel `%s` did not compile for device %s: %s",
                            request.signature.entry, info_.id, spir.status().message()));
      }
      return *std::move(spir);
    }
    case ModuleFormat::kSpirv:
    case ModuleFormat::kLlvmBitcodeSpir64: {
      if (!spir_) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "kernel `%s`: device %s cannot run a %s module: it lacks cl_khr_spir; submit OpenCL C",
            request.signature.entry, info_.id, module_format_name(format)));
      }
      absl::StatusOr<std::string> spir = lowering.lower(request, CodeTarget::kSpir, "");
      if (!spir.ok()) {
        return absl::Status(spir.status().code(),
                            absl::StrFormat("kernel `%s` on device %s: %s", request.signature.entry,
                                            info_.id, spir.status().message()));
      }
      return *std::move(spir);
    }
    default:
      return std::nullopt;  // not for this device: compile() says so
  }
}

absl::StatusOr<std::vector<LoweredCode>> OpenClDevice::lower_ahead(const CompileRequest& request) {
  absl::StatusOr<std::optional<std::string>> spir = lowered_spir(request);
  if (!spir.ok()) return spir.status();
  std::vector<LoweredCode> lowered;
  if (*spir) {
    lowered.push_back(
        {KernelLowering::shared().code_key(request, CodeTarget::kSpir, ""), **std::move(spir)});
  }
  return lowered;
}

absl::StatusOr<std::string> OpenClDevice::program_binary(const CompiledKernel& kernel) const {
  // Every kernel this device compiled is an OpenClKernel.
  return static_cast<const OpenClKernel&>(kernel).program_binary();
}

absl::StatusOr<std::unique_ptr<CompiledKernel>> OpenClDevice::load_program_binary(
    const CompileRequest& request, absl::string_view binary) {
  absl::StatusOr<std::unique_ptr<OpenClKernel>> k =
      OpenClKernel::build(*this, request, {ProgramKind::kDriverBinary, binary});
  if (!k.ok()) return k.status();
  return std::unique_ptr<CompiledKernel>(std::move(*k));
}

absl::StatusOr<std::unique_ptr<CompiledKernel>> OpenClDevice::compile(
    const CompileRequest& request) {
  const ModuleFormat format = request.module.format();
  absl::StatusOr<std::unique_ptr<OpenClKernel>> k;
  switch (format) {
    case ModuleFormat::kOpenClC:
    case ModuleFormat::kSpirv:
    case ModuleFormat::kLlvmBitcodeSpir64: {
      absl::StatusOr<std::optional<std::string>> spir = lowered_spir(request);
      if (!spir.ok()) return spir.status();
      k = *spir ? OpenClKernel::build(*this, request, {ProgramKind::kSpir, **spir})
                : OpenClKernel::build(*this, request, {ProgramKind::kSource, request.source});
      break;
    }
    case ModuleFormat::kPtx:
    case ModuleFormat::kCubin:
    case ModuleFormat::kAmdgcnCodeObject:
      return absl::InvalidArgumentError(absl::StrFormat(
          "kernel `%s`: device %s (OpenCL) cannot run a %s module, which is device code for "
          "another kind of device; submit OpenCL C%s",
          request.signature.entry, info_.id, module_format_name(format),
          spir_ ? ", SPIR-V or LLVM bitcode (spir64)" : ""));
  }
  if (!k.ok()) return k.status();
  return std::unique_ptr<CompiledKernel>(std::move(*k));
}

}  // namespace kad::opencl
