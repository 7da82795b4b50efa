#include "backends/hsa/hsa_device.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backends/hsa/hsa_buffer.h"
#include "backends/hsa/hsa_code_object.h"
#include "backends/hsa/hsa_kernel.h"
#include "backends/hsa/hsa_queue.h"
#include "backends/hsa/hsa_status.h"
#include "core/driver_scope.h"
#include "core/kernel_lowering.h"

namespace kad::hsa {
namespace {

// Queues hold at most this many packets (and as many kernarg slots).
constexpr uint32_t kQueuePackets = 1024;

template <typename T, typename Info>
absl::Status agent_info(const HsaApi& api, hsa_agent_t agent, Info what, absl::string_view name,
                        T* out) {
  return hsa_status(api.hsa_agent_get_info(agent, static_cast<hsa_agent_info_t>(what), out),
                    "hsa_agent_get_info", name);
}

std::string agent_string(const HsaApi& api, hsa_agent_t agent, int what) {
  char text[64] = {};  // the size the HSA headers give every agent string
  if (api.hsa_agent_get_info(agent, static_cast<hsa_agent_info_t>(what), text) !=
      HSA_STATUS_SUCCESS) {
    return {};
  }
  return std::string(text, strnlen(text, sizeof(text)));
}

// The first ISA the agent supports: a GPU agent has exactly one.
absl::StatusOr<std::string> agent_isa(const HsaApi& api, hsa_agent_t agent) {
  struct Search {
    const HsaApi* api;
    std::string name;
    hsa_status_t status = HSA_STATUS_SUCCESS;
  } search{&api, {}};
  auto first = [](hsa_isa_t isa, void* data) -> hsa_status_t {
    auto* s = static_cast<Search*>(data);
    uint32_t length = 0;
    s->status = s->api->hsa_isa_get_info_alt(isa, HSA_ISA_INFO_NAME_LENGTH, &length);
    if (s->status != HSA_STATUS_SUCCESS) return s->status;
    std::vector<char> name(length + 1, '\0');
    s->status = s->api->hsa_isa_get_info_alt(isa, HSA_ISA_INFO_NAME, name.data());
    if (s->status != HSA_STATUS_SUCCESS) return s->status;
    s->name.assign(name.data(), strnlen(name.data(), length));
    return HSA_STATUS_INFO_BREAK;
  };
  if (absl::Status s =
          hsa_status(api.hsa_agent_iterate_isas(agent, first, &search), "hsa_agent_iterate_isas");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = hsa_status(search.status, "hsa_isa_get_info_alt"); !s.ok()) return s;
  if (search.name.empty()) return absl::NotFoundError("the agent reports no ISA");
  return search.name;
}

// The pools kad uses on one agent.
struct Pools {
  const HsaApi* api = nullptr;
  hsa_amd_memory_pool_t device{};   // GPU: coarse-grained global memory
  hsa_amd_memory_pool_t kernarg{};  // CPU: fine-grained memory for kernargs
  bool has_device = false;
  bool has_kernarg = false;
  size_t device_bytes = 0;
  size_t device_max_allocation = 0;
  size_t group_bytes = 0;  // GPU: the group segment (LDS) of one workgroup
};

hsa_status_t visit_pool(hsa_amd_memory_pool_t pool, void* data) {
  auto* p = static_cast<Pools*>(data);
  const HsaApi& api = *p->api;
  hsa_amd_segment_t segment{};
  size_t size = 0;
  if (api.hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_SEGMENT, &segment) !=
          HSA_STATUS_SUCCESS ||
      api.hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_SIZE, &size) !=
          HSA_STATUS_SUCCESS) {
    return HSA_STATUS_SUCCESS;  // a pool kad cannot describe is one it does not use
  }
  if (segment == HSA_AMD_SEGMENT_GROUP) {
    p->group_bytes = std::max(p->group_bytes, size);
    return HSA_STATUS_SUCCESS;
  }
  if (segment != HSA_AMD_SEGMENT_GLOBAL) return HSA_STATUS_SUCCESS;
  uint32_t flags = 0;
  bool allowed = false;
  api.hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS, &flags);
  api.hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED, &allowed);
  if (!allowed) return HSA_STATUS_SUCCESS;
  if (!p->has_device && (flags & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED)) {
    p->device = pool;
    p->has_device = true;
    p->device_bytes = size;
    size_t max_allocation = 0;
    p->device_max_allocation =
        api.hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_ALLOC_MAX_SIZE,
                                         &max_allocation) == HSA_STATUS_SUCCESS &&
                max_allocation > 0
            ? max_allocation
            : size;
  }
  if (!p->has_kernarg && (flags & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT)) {
    p->kernarg = pool;
    p->has_kernarg = true;
  }
  return HSA_STATUS_SUCCESS;
}

absl::StatusOr<Pools> agent_pools(const HsaApi& api, hsa_agent_t agent) {
  Pools pools;
  pools.api = &api;
  if (absl::Status s = hsa_status(api.hsa_amd_agent_iterate_memory_pools(agent, visit_pool, &pools),
                                  "hsa_amd_agent_iterate_memory_pools");
      !s.ok()) {
    return s;
  }
  return pools;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HsaDevice>> HsaDevice::create(std::shared_ptr<const HsaApi> api,
                                                             hsa_agent_t gpu, hsa_agent_t host,
                                                             std::string id) {
  std::unique_ptr<HsaDevice> dev(new HsaDevice(api, gpu, host));
  DeviceInfo& info = dev->info_;
  DriverScope driver;

  absl::StatusOr<std::string> isa = agent_isa(*api, gpu);
  if (!isa.ok()) return isa.status();
  dev->isa_ = *isa;
  dev->processor_ = std::string(target_processor(*isa));

  uint32_t wavefront = 0, max_items = 0, units = 0, queue_max = 0;
  uint16_t max_dims[3] = {};
  for (absl::Status s :
       {agent_info(*api, gpu, HSA_AGENT_INFO_PROFILE, "HSA_AGENT_INFO_PROFILE", &dev->profile_),
        agent_info(*api, gpu, HSA_AGENT_INFO_WAVEFRONT_SIZE, "HSA_AGENT_INFO_WAVEFRONT_SIZE",
                   &wavefront),
        agent_info(*api, gpu, HSA_AGENT_INFO_WORKGROUP_MAX_SIZE,
                   "HSA_AGENT_INFO_WORKGROUP_MAX_SIZE", &max_items),
        agent_info(*api, gpu, HSA_AGENT_INFO_WORKGROUP_MAX_DIM, "HSA_AGENT_INFO_WORKGROUP_MAX_DIM",
                   &max_dims),
        agent_info(*api, gpu, HSA_AGENT_INFO_GRID_MAX_DIM, "HSA_AGENT_INFO_GRID_MAX_DIM",
                   &dev->grid_max_),
        agent_info(*api, gpu, HSA_AGENT_INFO_QUEUE_MAX_SIZE, "HSA_AGENT_INFO_QUEUE_MAX_SIZE",
                   &queue_max),
        agent_info(*api, gpu, HSA_AMD_AGENT_INFO_COMPUTE_UNIT_COUNT,
                   "HSA_AMD_AGENT_INFO_COMPUTE_UNIT_COUNT", &units)}) {
    if (!s.ok()) return s;
  }
  dev->queue_size_ = std::min(queue_max, kQueuePackets);
  if (dev->queue_size_ == 0) return absl::InternalError("the agent allows queues of 0 packets");

  absl::StatusOr<Pools> gpu_pools = agent_pools(*api, gpu);
  if (!gpu_pools.ok()) return gpu_pools.status();
  if (!gpu_pools->has_device) {
    return absl::NotFoundError("the agent has no coarse-grained global memory pool");
  }
  absl::StatusOr<Pools> host_pools = agent_pools(*api, host);
  if (!host_pools.ok()) return host_pools.status();
  if (!host_pools->has_kernarg) {
    return absl::NotFoundError("the host agent has no kernarg memory pool");
  }
  dev->device_pool_ = gpu_pools->device;
  dev->host_pool_ = host_pools->kernarg;

  uint64_t frequency = 0;
  api->hsa_system_get_info(HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY, &frequency);
  dev->wait_ticks_ = std::max<uint64_t>(frequency / 100, 1);  // 10 ms
  uint16_t major = 0, minor = 0;
  api->hsa_system_get_info(HSA_SYSTEM_INFO_VERSION_MAJOR, &major);
  api->hsa_system_get_info(HSA_SYSTEM_INFO_VERSION_MINOR, &minor);
  const char* build = nullptr;
  if (api->hsa_system_get_info(static_cast<hsa_system_info_t>(HSA_AMD_SYSTEM_INFO_BUILD_VERSION),
                               &build) != HSA_STATUS_SUCCESS) {
    build = nullptr;
  }

  info.backend = "hsa";
  info.id = std::move(id);
  info.name = agent_string(*api, gpu, HSA_AMD_AGENT_INFO_PRODUCT_NAME);
  if (info.name.empty()) info.name = agent_string(*api, gpu, HSA_AGENT_INFO_NAME);
  info.vendor = agent_string(*api, gpu, HSA_AGENT_INFO_VENDOR_NAME);
  info.platform = "HSA";
  info.driver_version =
      absl::StrCat("HSA ", major, ".", minor, build ? "; ROCr " : "", build ? build : "");
  info.toolchain_version = absl::StrCat(KernelLowering::shared().version(), "; ", dev->processor_);
  info.formats = {ModuleFormat::kOpenClC, ModuleFormat::kAmdgcnCodeObject};

  DeviceLimits& l = info.limits;
  l.max_workgroup_size = max_items;
  for (int d = 0; d < 3; ++d) l.max_workgroup_dims[d] = max_dims[d];
  // An AQL packet bounds the grid in work-items; groups are at most that.
  // HsaQueue checks groups x items per dimension at launch.
  l.max_groups = {dev->grid_max_.x, dev->grid_max_.y, dev->grid_max_.z};
  l.compute_units = units;
  l.subgroup_width = wavefront;
  l.global_memory_bytes = gpu_pools->device_bytes;
  l.max_allocation_bytes = gpu_pools->device_max_allocation;
  l.local_memory_bytes = gpu_pools->group_bytes;
  l.max_parameter_bytes = kMaxParameterBytes;
  return dev;
}

absl::StatusOr<void*> HsaDevice::allocate_host(uint64_t bytes) const {
  DriverScope driver;
  void* pointer = nullptr;
  if (absl::Status s =
          hsa_status(api_->hsa_amd_memory_pool_allocate(host_pool_, bytes, 0, &pointer),
                     "hsa_amd_memory_pool_allocate", absl::StrCat(bytes, " bytes of host memory"));
      !s.ok()) {
    return s;
  }
  if (absl::Status s = hsa_status(api_->hsa_amd_agents_allow_access(1, &agent_, nullptr, pointer),
                                  "hsa_amd_agents_allow_access", info_.id);
      !s.ok()) {
    api_->hsa_amd_memory_pool_free(pointer);
    return s;
  }
  return pointer;
}

absl::StatusOr<std::unique_ptr<Buffer>> HsaDevice::allocate(uint64_t bytes) {
  if (absl::Status s = check_allocation(info_, bytes); !s.ok()) return s;
  void* pointer = nullptr;
  {
    DriverScope driver;
    if (absl::Status s =
            hsa_status(api_->hsa_amd_memory_pool_allocate(device_pool_, bytes, 0, &pointer),
                       "hsa_amd_memory_pool_allocate", absl::StrCat(bytes, " bytes on ", info_.id));
        !s.ok()) {
      return s;
    }
  }
  auto buffer = std::make_unique<HsaBuffer>(*this, pointer, bytes);
  // Fresh device memory may hold what another session freed (DESIGN §8). The
  // fill is synchronous and counts 32-bit words; the pool allocates whole pages.
  {
    DriverScope driver;
    if (absl::Status s = hsa_status(api_->hsa_amd_memory_fill(pointer, 0, (bytes + 3) / 4),
                                    "hsa_amd_memory_fill",
                                    absl::StrCat("zeroing ", bytes, " bytes on ", info_.id));
        !s.ok())
      return s;
  }
  return buffer;
}

absl::StatusOr<std::unique_ptr<Queue>> HsaDevice::create_queue() {
  absl::StatusOr<std::unique_ptr<HsaQueue>> q = HsaQueue::create(*this);
  if (!q.ok()) return q.status();
  return std::unique_ptr<Queue>(std::move(*q));
}

std::string required_workgroup_option(const Specialization& spec) {
  const std::optional<std::array<uint64_t, 3>> block = static_hardware_workgroup(spec);
  if (!block) return {};
  return absl::StrFormat("-DKAD_REQD_WORK_GROUP_SIZE=%d,%d,%d", (*block)[0], (*block)[1],
                         (*block)[2]);
}

std::string HsaDevice::compiler_options(const KernelSignature& signature,
                                        const Specialization& spec) const {
  (void)signature;
  return required_workgroup_option(spec);
}

absl::StatusOr<std::unique_ptr<CompiledKernel>> HsaDevice::compile(const CompileRequest& request) {
  // The lowered code depends on the processor only: without target features
  // it is "any" code and loads whatever the device's xnack mode.
  absl::StatusOr<std::string> code =
      KernelLowering::shared().lower(request, CodeTarget::kAmdgcn, processor_);
  if (!code.ok()) return code.status();
  absl::StatusOr<std::unique_ptr<HsaKernel>> k =
      HsaKernel::load(*this, *std::move(code), request.signature);
  if (!k.ok()) return k.status();
  return std::unique_ptr<CompiledKernel>(std::move(*k));
}

}  // namespace kad::hsa
