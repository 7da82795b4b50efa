#include "backends/cuda/cuda_device.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backends/cuda/cuda_buffer.h"
#include "backends/cuda/cuda_kernel.h"
#include "backends/cuda/cuda_launch_configuration.h"
#include "backends/cuda/cuda_queue.h"
#include "backends/cuda/cuda_status.h"
#include "core/driver_scope.h"
#include "core/kernel_lowering.h"

namespace kad::cuda {
namespace {

// CUDA's kernel parameter space (4 KiB; larger only from CUDA 12.1 on Volta+).
constexpr uint64_t kParameterBytes = 4096;

}  // namespace

absl::StatusOr<std::unique_ptr<CudaDevice>> CudaDevice::create(std::shared_ptr<const CudaApi> api,
                                                               int ordinal,
                                                               const DeviceOptions& options) {
  const CudaApi& cu = *api;
  CUdevice device = 0;
  if (absl::Status s = cu_status(cu, cu.cuDeviceGet(&device, ordinal), "cuDeviceGet",
                                 absl::StrCat("device ", ordinal));
      !s.ok()) {
    return s;
  }
  std::unique_ptr<CudaDevice> dev(new CudaDevice(std::move(api), device, options));
  DeviceInfo& info = dev->info_;
  char name[256] = {};
  if (absl::Status s =
          cu_status(cu, cu.cuDeviceGetName(name, sizeof(name) - 1, device), "cuDeviceGetName");
      !s.ok()) {
    return s;
  }
  auto attribute = [&](int which, int* value) {
    return cu_status(cu, cu.cuDeviceGetAttribute(value, which, device), "cuDeviceGetAttribute",
                     absl::StrCat("attribute ", which, " of device ", ordinal));
  };
  int threads = 0, bx = 0, by = 0, bz = 0, gx = 0, gy = 0, gz = 0, shared = 0, warp = 0, sms = 0,
      major = 0, minor = 0;
  for (auto [which, value] : {std::pair{CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &threads},
                              {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, &bx},
                              {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, &by},
                              {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, &bz},
                              {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, &gx},
                              {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, &gy},
                              {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, &gz},
                              {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, &shared},
                              {CU_DEVICE_ATTRIBUTE_WARP_SIZE, &warp},
                              {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &sms},
                              {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &major},
                              {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &minor}}) {
    if (absl::Status s = attribute(which, value); !s.ok()) return s;
  }
  size_t memory = 0;
  if (absl::Status s = cu_status(cu, cu.cuDeviceTotalMem(&memory, device), "cuDeviceTotalMem");
      !s.ok()) {
    return s;
  }
  absl::StatusOr<std::string> target = ptx_target_for(major, minor);
  if (!target.ok()) return target.status();
  dev->ptx_target_ = *target;
  int driver = 0;
  (void)cu.cuDriverGetVersion(&driver);

  info.backend = "cuda";
  info.id = absl::StrCat("cuda:", ordinal);
  info.name = name;
  info.vendor = "NVIDIA";
  info.platform = "CUDA";
  info.driver_version = absl::StrFormat("CUDA driver %d.%d", driver / 1000, driver % 1000 / 10);
  info.toolchain_version =
      absl::StrCat(KernelLowering::shared().version(), "; PTX ", dev->ptx_target_,
                   "; compute capability ", major, ".", minor);
  info.formats = {ModuleFormat::kOpenClC, ModuleFormat::kPtx, ModuleFormat::kCubin};
  DeviceLimits& l = info.limits;
  l.max_workgroup_size = static_cast<uint64_t>(threads);
  l.max_workgroup_dims = {static_cast<uint64_t>(bx), static_cast<uint64_t>(by),
                          static_cast<uint64_t>(bz)};
  l.max_groups = {static_cast<uint64_t>(gx), static_cast<uint64_t>(gy), static_cast<uint64_t>(gz)};
  l.compute_units = static_cast<uint64_t>(sms);
  l.subgroup_width = static_cast<uint64_t>(warp);
  l.global_memory_bytes = memory;
  l.max_allocation_bytes = memory;
  l.local_memory_bytes = static_cast<uint64_t>(shared);
  l.max_parameter_bytes = kParameterBytes;

  if (absl::Status s = cu_status(cu, cu.cuDevicePrimaryCtxRetain(&dev->context_, device),
                                 "cuDevicePrimaryCtxRetain", info.id);
      !s.ok()) {
    return s;
  }
  return dev;
}

CudaDevice::~CudaDevice() {
  if (context_ != nullptr) api_->cuDevicePrimaryCtxRelease(device_);
}

absl::Status CudaDevice::make_current() const {
  // The driver keeps one current context per thread; kad threads serve any device.
  thread_local CUcontext current = nullptr;
  if (current == context_) return absl::OkStatus();
  DriverScope driver;
  if (absl::Status s =
          cu_status(*api_, api_->cuCtxSetCurrent(context_), "cuCtxSetCurrent", info_.id);
      !s.ok()) {
    return s;
  }
  current = context_;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Buffer>> CudaDevice::allocate(uint64_t bytes) {
  if (absl::Status s = check_allocation(info_, bytes); !s.ok()) return s;
  if (absl::Status s = make_current(); !s.ok()) return s;
  CUdeviceptr pointer = 0;
  {
    DriverScope driver;
    if (absl::Status s = cu_status(*api_, api_->cuMemAlloc(&pointer, bytes), "cuMemAlloc",
                                   absl::StrCat(bytes, " bytes on ", info_.id));
        !s.ok()) {
      return s;
    }
  }
  auto buffer = std::make_unique<CudaBuffer>(*this, pointer, bytes);
  // Fresh device memory may hold what another session freed (DESIGN §8). The
  // memset runs on the legacy stream, which the queues' non-blocking streams
  // do not wait for: it is waited for here, before any queue sees the buffer.
  {
    DriverScope driver;
    if (absl::Status s = cu_status(*api_, api_->cuMemsetD8(pointer, 0, bytes), "cuMemsetD8",
                                   absl::StrCat("zeroing ", bytes, " bytes on ", info_.id));
        !s.ok())
      return s;
    if (absl::Status s = cu_status(*api_, api_->cuStreamSynchronize(nullptr), "cuStreamSynchronize",
                                   "zeroing a new buffer");
        !s.ok())
      return s;
  }
  return buffer;
}

absl::StatusOr<std::unique_ptr<Queue>> CudaDevice::create_queue() {
  absl::StatusOr<std::unique_ptr<CudaQueue>> q = CudaQueue::create(*this);
  if (!q.ok()) return q.status();
  return std::unique_ptr<Queue>(std::move(*q));
}

absl::StatusOr<std::unique_ptr<CompiledKernel>> CudaDevice::compile(const CompileRequest& request) {
  absl::StatusOr<std::unique_ptr<CudaKernel>> k = CudaKernel::build(*this, request);
  if (!k.ok()) return k.status();
  return std::unique_ptr<CompiledKernel>(std::move(*k));
}

}  // namespace kad::cuda
