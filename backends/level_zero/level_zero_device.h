// One Level Zero device (a GPU of one driver), with its own context shared by
// its queues, buffers and kernels, and the compute engine group its queues use.
#pragma once

#include <level_zero/ze_api.h>

#include <memory>
#include <string>

#include "backends/level_zero/level_zero_api.h"
#include "core/backend.h"

namespace kad::level_zero {

class LevelZeroDevice final : public Device {
 public:
  // Queries the device's limits once and creates its context.
  static absl::StatusOr<std::unique_ptr<LevelZeroDevice>> create(
      std::shared_ptr<const LevelZeroApi> api, ze_driver_handle_t driver, ze_device_handle_t device,
      std::string id);
  ~LevelZeroDevice() override;

  const DeviceInfo& info() const override { return info_; }
  absl::StatusOr<std::unique_ptr<Buffer>> allocate(uint64_t bytes) override;
  absl::StatusOr<std::unique_ptr<Queue>> create_queue() override;
  // Lowers the module to SPIR-V (KernelLowering: cache, else toolchain) and
  // builds it with the driver; a failure names the kernel and this device and
  // carries the build log.
  absl::StatusOr<std::unique_ptr<CompiledKernel>> compile(const CompileRequest& request) override;

  const LevelZeroApi& api() const { return *api_; }
  ze_context_handle_t context() const { return context_; }
  ze_device_handle_t handle() const { return device_; }
  // The command queue group with compute engines: every queue's immediate
  // command list goes there.
  uint32_t compute_ordinal() const { return compute_ordinal_; }

 private:
  absl::Status zero(void* address, uint64_t bytes);
  LevelZeroDevice(std::shared_ptr<const LevelZeroApi> api, ze_device_handle_t device)
      : api_(std::move(api)), device_(device) {}

  std::shared_ptr<const LevelZeroApi> api_;
  ze_device_handle_t device_;
  ze_context_handle_t context_ = nullptr;
  uint32_t compute_ordinal_ = 0;
  DeviceInfo info_;
};

}  // namespace kad::level_zero
