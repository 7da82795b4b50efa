// One CUDA device: its primary context, shared by every session and queue
// (DESIGN §2: one device context per machine's daemon), and the limits the
// pipeline needs, queried once.
#pragma once

#include <memory>
#include <string>

#include "backends/cuda/cuda_api.h"
#include "core/backend.h"

namespace kad::cuda {

struct DeviceOptions {
  // Tuning trades threads for blocks so that every SM gets work (see
  // occupancy_threads).
  bool prefer_blocks = false;
};

class CudaDevice final : public Device {
 public:
  static absl::StatusOr<std::unique_ptr<CudaDevice>> create(std::shared_ptr<const CudaApi> api,
                                                            int ordinal,
                                                            const DeviceOptions& options);
  ~CudaDevice() override;

  const DeviceInfo& info() const override { return info_; }
  absl::StatusOr<std::unique_ptr<Buffer>> allocate(uint64_t bytes) override;
  absl::StatusOr<std::unique_ptr<Queue>> create_queue() override;
  absl::StatusOr<std::unique_ptr<CompiledKernel>> compile(const CompileRequest& request) override;

  const CudaApi& api() const { return *api_; }
  const DeviceOptions& options() const { return options_; }
  // The PTX target kernels are lowered for ("sm_80").
  const std::string& ptx_target() const { return ptx_target_; }
  // Makes the device's context current on the calling thread: every driver
  // call names a context implicitly. Cheap when it already is.
  absl::Status make_current() const;

 private:
  CudaDevice(std::shared_ptr<const CudaApi> api, CUdevice device, const DeviceOptions& options)
      : api_(std::move(api)), device_(device), options_(options) {}

  std::shared_ptr<const CudaApi> api_;
  CUdevice device_;
  DeviceOptions options_;
  CUcontext context_ = nullptr;
  std::string ptx_target_;
  DeviceInfo info_;
};

}  // namespace kad::cuda
