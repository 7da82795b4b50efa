// Device memory: one allocation from the GPU agent's coarse-grained global
// memory pool.
#pragma once

#include <cstdint>

#include "backends/hsa/hsa_device.h"
#include "core/backend.h"
#include "core/driver_scope.h"

namespace kad::hsa {

class HsaBuffer final : public Buffer {
 public:
  HsaBuffer(HsaDevice& device, void* pointer, uint64_t size)
      : device_(device), pointer_(pointer), size_(size) {}
  ~HsaBuffer() override {
    DriverScope driver;
    device_.api().hsa_amd_memory_pool_free(pointer_);
  }

  uint64_t size() const override { return size_; }
  const Device& device() const override { return device_; }
  void* pointer() const { return pointer_; }

  // For pack_kernargs: the address a kernel sees.
  static uint64_t address(const Buffer* buffer) {
    return reinterpret_cast<uint64_t>(static_cast<const HsaBuffer*>(buffer)->pointer_);
  }

 private:
  HsaDevice& device_;
  void* pointer_;
  uint64_t size_;
};

}  // namespace kad::hsa
