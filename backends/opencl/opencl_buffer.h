// Device memory: one cl_mem in the device's context.
#pragma once

#include "backends/opencl/cl.h"
#include "backends/opencl/opencl_device.h"
#include "core/backend.h"

namespace kad::opencl {

class OpenClBuffer final : public Buffer {
 public:
  OpenClBuffer(OpenClDevice& device, cl_mem mem, uint64_t size)
      : device_(device), mem_(mem), size_(size) {}
  ~OpenClBuffer() override { device_.api().clReleaseMemObject(mem_); }

  uint64_t size() const override { return size_; }
  const Device& device() const override { return device_; }
  cl_mem mem() const { return mem_; }

 private:
  OpenClDevice& device_;
  cl_mem mem_;
  uint64_t size_;
};

}  // namespace kad::opencl
