// Device memory: one zeMemAllocDevice allocation in the device's context.
#pragma once

#include "backends/level_zero/level_zero_device.h"
#include "core/backend.h"

namespace kad::level_zero {

class LevelZeroBuffer final : public Buffer {
 public:
  LevelZeroBuffer(LevelZeroDevice& device, void* address, uint64_t size)
      : device_(device), address_(address), size_(size) {}
  // The memory must be idle: Level Zero, unlike OpenCL, does not defer the
  // free until the commands using it are done (a closing session finishes its
  // queues first; see the folder's README).
  ~LevelZeroBuffer() override { device_.api().zeMemFree(device_.context(), address_); }

  uint64_t size() const override { return size_; }
  const Device& device() const override { return device_; }
  void* address() const { return address_; }
  // Where the device address lives, for zeKernelSetArgumentValue: the driver
  // copies the 8 bytes from here, so a launch copies nothing itself.
  void* const* address_slot() const { return &address_; }

 private:
  LevelZeroDevice& device_;
  void* address_;
  uint64_t size_;
};

}  // namespace kad::level_zero
