#include "backends/cuda/cuda_backend.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backends/cuda/cuda_status.h"
#include "core/kernel_lowering.h"

namespace kad::cuda {

BackendDiscovery discover(const DiscoveryOptions& options) {
  BackendDiscovery found;
  absl::StatusOr<std::shared_ptr<const CudaApi>> api = CudaApi::load(options.library);
  if (!api.ok()) {
    found.log.push_back(
        absl::StrCat("cuda: disabled, no NVIDIA driver (", api.status().message(), ")"));
    return found;
  }
  const CudaApi& cu = **api;
  if (absl::Status s = cu_status(cu, cu.cuInit(0), "cuInit"); !s.ok()) {
    found.log.push_back(absl::StrCat("cuda: disabled, ", s.message()));
    return found;
  }
  int count = 0;
  if (absl::Status s = cu_status(cu, cu.cuDeviceGetCount(&count), "cuDeviceGetCount"); !s.ok()) {
    found.log.push_back(absl::StrCat("cuda: disabled, ", s.message()));
    return found;
  }
  if (count == 0) {
    found.log.push_back("cuda: disabled, the driver reports no CUDA device");
    return found;
  }
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    absl::StatusOr<std::unique_ptr<CudaDevice>> device =
        CudaDevice::create(*api, ordinal, options.device);
    if (!device.ok()) {
      found.log.push_back(
          absl::StrFormat("cuda: device %d skipped: %s", ordinal, device.status().message()));
      continue;
    }
    const DeviceInfo& info = (*device)->info();
    found.log.push_back(absl::StrFormat(
        "cuda: %s %s, %d SMs, %d MiB, %s; %s", info.id, info.name, info.limits.compute_units,
        info.limits.global_memory_bytes >> 20, info.driver_version, info.toolchain_version));
    found.devices.push_back(std::move(*device));
  }
  if (!found.devices.empty()) {
    KernelLowering& lowering = KernelLowering::shared();
    if (absl::Status s = lowering.toolchain_status(); !s.ok()) {
      found.log.push_back(absl::StrFormat(
          "cuda: no toolchain (%s): kernels run from PTX modules and code cached in %s",
          s.message(), lowering.cache().enabled() ? lowering.cache().folder() : "(cache off)"));
    }
  }
  return found;
}

}  // namespace kad::cuda
