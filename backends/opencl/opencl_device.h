// One OpenCL device (PoCL's CPU device or any ICD platform's), with one
// context shared by all of its queues, buffers and kernels.
#pragma once

#include <memory>
#include <optional>

#include "absl/synchronization/mutex.h"
#include "backends/opencl/cl.h"
#include "backends/opencl/opencl_api.h"
#include "core/backend.h"

namespace kad::opencl {

class OpenClDevice final : public Device {
 public:
  // Queries the device's limits once and creates its context. `timed_queues`:
  // its queues are made with profiling, for device_times.
  static absl::StatusOr<std::unique_ptr<OpenClDevice>> create(std::shared_ptr<const OpenClApi> api,
                                                              cl_platform_id platform,
                                                              cl_device_id device, std::string id,
                                                              bool timed_queues = true);
  ~OpenClDevice() override;

  const DeviceInfo& info() const override { return info_; }
  absl::StatusOr<std::unique_ptr<Buffer>> allocate(uint64_t bytes) override;
  absl::StatusOr<std::unique_ptr<Buffer>> import_host_memory(const HostMemoryRef& host) override;
  absl::StatusOr<std::unique_ptr<Queue>> create_queue() override;
  absl::StatusOr<std::unique_ptr<CompiledKernel>> compile(const CompileRequest& request) override;
  absl::StatusOr<std::vector<LoweredCode>> lower_ahead(const CompileRequest& request) override;
  absl::StatusOr<std::string> program_binary(const CompiledKernel& kernel) const override;
  absl::StatusOr<std::unique_ptr<CompiledKernel>> load_program_binary(
      const CompileRequest& request, absl::string_view binary) override;

  const OpenClApi& api() const { return *api_; }
  cl_context context() const { return context_; }
  cl_device_id device_id() const { return device_; }
  // Takes SPIR 1.2 bitcode (cl_khr_spir): IR modules run here.
  bool consumes_spir() const { return spir_; }
  bool timed_queues() const { return timed_queues_; }

 private:
  OpenClDevice(std::shared_ptr<const OpenClApi> api, cl_device_id device)
      : api_(std::move(api)), device_(device) {}

  absl::StatusOr<std::unique_ptr<Buffer>> create_buffer(cl_mem_flags flags, void* host,
                                                        uint64_t bytes);
  // Fresh memory may hold what another session freed (DESIGN §8): every
  // allocation is zeroed, on a queue of the device's own, before it is handed out.
  absl::Status zero(cl_mem mem, uint64_t bytes);

  std::shared_ptr<const OpenClApi> api_;
  cl_device_id device_;
  cl_context context_ = nullptr;
  absl::Mutex zero_mu_;
  cl_command_queue zero_queue_ ABSL_GUARDED_BY(zero_mu_) = nullptr;  // made on first use
  bool spir_ = false;
  bool timed_queues_ = true;

  // The SPIR the driver builds for `request`, lowered by kad's toolchain
  // through the code cache; none when the driver compiles the source itself
  // (no cl_khr_spir, or no toolchain) or the format is not for this device.
  absl::StatusOr<std::optional<std::string>> lowered_spir(const CompileRequest& request) const;
  DeviceInfo info_;
};

}  // namespace kad::opencl
