// Device memory from cuMemAlloc, in the device's primary context.
#pragma once

#include "backends/cuda/cuda_device.h"
#include "core/backend.h"

namespace kad::cuda {

class CudaBuffer final : public Buffer {
 public:
  CudaBuffer(const CudaDevice& device, CUdeviceptr pointer, uint64_t size)
      : device_(device), pointer_(pointer), size_(size) {}
  ~CudaBuffer() override {
    if (device_.make_current().ok()) device_.api().cuMemFree(pointer_);
  }

  uint64_t size() const override { return size_; }
  const Device& device() const override { return device_; }
  // Kernel parameters take the pointer's address: it must stay put.
  const CUdeviceptr& pointer() const { return pointer_; }

 private:
  const CudaDevice& device_;
  CUdeviceptr pointer_;
  uint64_t size_;
};

}  // namespace kad::cuda
