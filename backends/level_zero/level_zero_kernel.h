// A kernel compiled for one Level Zero device: its module (built from
// SPIR-V), its ze_kernel_handle_t and the limits the driver reports for it.
#pragma once

#include <level_zero/ze_api.h>

#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "backends/level_zero/level_zero_device.h"
#include "core/backend.h"

namespace kad::level_zero {

class LevelZeroKernel final : public CompiledKernel {
 public:
  // Builds `spirv` and creates the kernel `request.signature.entry`; checks
  // its parameter count against the signature. A failure names the kernel
  // and the device and carries the driver's build log.
  static absl::StatusOr<std::unique_ptr<LevelZeroKernel>> build(LevelZeroDevice& device,
                                                                const CompileRequest& request,
                                                                absl::string_view spirv);
  ~LevelZeroKernel() override;

  const KernelLimits& limits() const override { return limits_; }
  // zeKernelSuggestGroupSize for the launch (see suggestion_extent), within
  // the kernel's maximum and `max_items`.
  uint64_t launch_configuration(uint64_t nitems, uint64_t max_items) const override;

  const std::string& name() const { return name_; }
  ze_kernel_handle_t handle() const { return kernel_; }
  // Arguments and group size are state of the ze_kernel_handle_t, which
  // concurrent sessions share: setting them and the append that reads them
  // must not interleave between threads.
  absl::Mutex& launch_mutex() { return launch_mutex_; }

 private:
  LevelZeroKernel(LevelZeroDevice& device, std::string name)
      : device_(device), name_(std::move(name)) {}

  LevelZeroDevice& device_;
  std::string name_;
  ze_module_handle_t module_ = nullptr;
  ze_kernel_handle_t kernel_ = nullptr;
  KernelLimits limits_;
  absl::Mutex launch_mutex_;
};

}  // namespace kad::level_zero
