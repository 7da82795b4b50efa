// A kernel compiled for one CUDA device: PTX (lowered by core's toolchain, or
// submitted) loaded with the driver's JIT, and what the occupancy API says
// about it.
#pragma once

#include <string>

#include "backends/cuda/cuda_device.h"
#include "core/backend.h"

namespace kad::cuda {

class CudaKernel final : public CompiledKernel {
 public:
  static absl::StatusOr<std::unique_ptr<CudaKernel>> build(CudaDevice& device,
                                                           const CompileRequest& request);
  ~CudaKernel() override;

  const KernelLimits& limits() const override { return limits_; }
  // The occupancy API's block size (queried once, when the kernel is built:
  // no driver call per launch), within `max_items`; see occupancy_threads.
  uint64_t launch_configuration(uint64_t nitems, uint64_t max_items) const override;

  const std::string& name() const { return name_; }
  CUfunction function() const { return function_; }

 private:
  CudaKernel(CudaDevice& device, std::string name) : device_(device), name_(std::move(name)) {}

  CudaDevice& device_;
  std::string name_;
  CUmodule module_ = nullptr;
  CUfunction function_ = nullptr;
  KernelLimits limits_;
  int occupancy_block_ = 0;
  int occupancy_min_grid_ = 0;
};

}  // namespace kad::cuda
