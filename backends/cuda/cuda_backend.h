// Finds the CUDA devices: the Driver API (libcuda.so.1) loaded with dlopen,
// one kad device per CUDA ordinal. A missing library, a failed cuInit or no
// device is one log line, and kad runs on without CUDA.
#pragma once

#include "backends/cuda/cuda_device.h"
#include "core/backend.h"

namespace kad::cuda {

struct DiscoveryOptions {
  const char* library = "libcuda.so.1";
  DeviceOptions device;
};

BackendDiscovery discover(const DiscoveryOptions& options = {});

}  // namespace kad::cuda
