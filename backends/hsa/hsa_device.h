// One HSA GPU agent: its limits (queried once), the memory pools kad
// allocates from, and the processor name (gfx90a, ...) code is lowered for.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "backends/hsa/hsa_api.h"
#include "backends/hsa/hsa_headers.h"
#include "core/backend.h"

namespace kad::hsa {

// Each queue keeps one kernarg slot of this size per packet, so a kernel's
// kernarg segment (context, arguments and hidden arguments) must fit in it.
inline constexpr uint32_t kKernargSlotBytes = 4096;
// What that leaves for the user's arguments: the context takes 256 bytes and
// code object v5's hidden arguments up to 256 more.
inline constexpr uint32_t kMaxParameterBytes = kKernargSlotBytes - 512;

// AMDGPU compiles an OpenCL kernel for at most 256 work-items per workgroup
// unless the kernel declares more: for a static workgroup size, the compiler
// option that makes the prelude declare it as the kernel's required size
// (KAD_REQD_WORK_GROUP_SIZE), so that larger static workgroups run and the
// code is sized for exactly that block. "" for a dynamic workgroup size.
std::string required_workgroup_option(const Specialization& spec);

class HsaDevice final : public Device {
 public:
  // `host` is the CPU agent whose memory serves as kernarg and staging
  // memory for this GPU.
  static absl::StatusOr<std::unique_ptr<HsaDevice>> create(std::shared_ptr<const HsaApi> api,
                                                           hsa_agent_t gpu, hsa_agent_t host,
                                                           std::string id);

  const DeviceInfo& info() const override { return info_; }
  absl::StatusOr<std::unique_ptr<Buffer>> allocate(uint64_t bytes) override;
  absl::StatusOr<std::unique_ptr<Queue>> create_queue() override;
  // OpenCL C through KernelLowering (clang -> AMDGCN -> ld.lld), or a
  // submitted code object as is; then loaded into an executable.
  absl::StatusOr<std::unique_ptr<CompiledKernel>> compile(const CompileRequest& request) override;
  // A static workgroup size as the kernel's required size (see
  // required_workgroup_option): part of the cache key.
  std::string compiler_options(const KernelSignature& signature,
                               const Specialization& spec) const override;

  const HsaApi& api() const { return *api_; }
  hsa_agent_t agent() const { return agent_; }
  hsa_agent_t host_agent() const { return host_; }
  hsa_profile_t profile() const { return profile_; }
  // "gfx90a": what code is lowered for, and what a code object must target.
  const std::string& processor() const { return processor_; }
  // The full ISA name, "amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-".
  const std::string& isa() const { return isa_; }
  uint32_t queue_size() const { return queue_size_; }
  // Per-dimension grid limits in work-items (an AQL packet's grid size).
  const hsa_dim3_t& grid_max() const { return grid_max_; }
  // How long one blocked signal wait lasts before kad looks for queue errors.
  uint64_t wait_ticks() const { return wait_ticks_; }

  // Host memory the GPU can read and write (kernarg segments, copy staging):
  // allocated from the host agent's kernarg pool, GPU access granted.
  absl::StatusOr<void*> allocate_host(uint64_t bytes) const;

 private:
  HsaDevice(std::shared_ptr<const HsaApi> api, hsa_agent_t gpu, hsa_agent_t host)
      : api_(std::move(api)), agent_(gpu), host_(host) {}

  std::shared_ptr<const HsaApi> api_;
  hsa_agent_t agent_;
  hsa_agent_t host_;
  hsa_profile_t profile_ = HSA_PROFILE_BASE;
  hsa_amd_memory_pool_t device_pool_{};
  hsa_amd_memory_pool_t host_pool_{};
  std::string processor_;
  std::string isa_;
  uint32_t queue_size_ = 0;
  hsa_dim3_t grid_max_{};
  uint64_t wait_ticks_ = 0;
  DeviceInfo info_;
};

}  // namespace kad::hsa
