// A kernel loaded for one GPU agent: the code object in a frozen executable,
// its kernel descriptor, and the limits and kernarg layout its metadata
// gives.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "backends/hsa/hsa_code_object.h"
#include "backends/hsa/hsa_device.h"
#include "backends/hsa/hsa_headers.h"
#include "backends/hsa/hsa_kernarg.h"
#include "core/backend.h"

namespace kad::hsa {

// The kernel's limits from its metadata: the compiler's maximum flat
// workgroup size (256 for OpenCL kernels without attributes) within the
// device's, the wavefront as the preferred multiple, and the static group
// memory.
KernelLimits kernel_limits(const KernelMetadata& kernel, const DeviceLimits& device);

// Tuning (DESIGN §3.4): as many items as the kernel allows, at most
// `max_items`, and no more than `nitems` needs, in whole wavefronts when the
// limit allows one.
uint64_t choose_workgroup_size(const KernelLimits& limits, uint64_t nitems, uint64_t max_items);

class HsaKernel final : public CompiledKernel {
 public:
  // Reads the metadata of `code_object`, checks the kernel named by
  // `signature` against it, and loads the code onto `device`'s agent.
  static absl::StatusOr<std::unique_ptr<HsaKernel>> load(HsaDevice& device, std::string code_object,
                                                         const KernelSignature& signature);
  ~HsaKernel() override;

  const KernelLimits& limits() const override { return limits_; }
  uint64_t launch_configuration(uint64_t nitems, uint64_t max_items) const override {
    return choose_workgroup_size(limits_, nitems, max_items);
  }

  const std::string& name() const { return layout_.kernel; }
  const KernargLayout& layout() const { return layout_; }
  uint64_t kernel_object() const { return kernel_object_; }
  uint32_t private_segment_size() const { return private_segment_size_; }

 private:
  explicit HsaKernel(HsaDevice& device) : device_(device) {}

  HsaDevice& device_;
  std::string code_object_;  // the reader reads from it until destroyed
  hsa_code_object_reader_t reader_{};
  hsa_executable_t executable_{};
  uint64_t kernel_object_ = 0;
  uint32_t private_segment_size_ = 0;
  KernargLayout layout_;
  KernelLimits limits_;
};

}  // namespace kad::hsa
