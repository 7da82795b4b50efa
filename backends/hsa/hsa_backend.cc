#include "backends/hsa/hsa_backend.h"

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/hsa/hsa_api.h"
#include "backends/hsa/hsa_device.h"
#include "backends/hsa/hsa_status.h"

namespace kad::hsa {
namespace {

struct Agents {
  const HsaApi* api = nullptr;
  std::vector<hsa_agent_t> gpus;
  std::vector<hsa_agent_t> cpus;
};

hsa_status_t visit_agent(hsa_agent_t agent, void* data) {
  auto* agents = static_cast<Agents*>(data);
  hsa_device_type_t type{};
  if (agents->api->hsa_agent_get_info(agent, HSA_AGENT_INFO_DEVICE, &type) != HSA_STATUS_SUCCESS) {
    return HSA_STATUS_SUCCESS;
  }
  if (type == HSA_DEVICE_TYPE_GPU) agents->gpus.push_back(agent);
  if (type == HSA_DEVICE_TYPE_CPU) agents->cpus.push_back(agent);
  return HSA_STATUS_SUCCESS;
}

// The runtime's own description ("HSA_STATUS_ERROR_OUT_OF_RESOURCES: The
// runtime failed to allocate ..."), else the status's name.
std::string describe(const HsaApi& api, hsa_status_t status) {
  const char* text = nullptr;
  if (api.hsa_status_string(status, &text) == HSA_STATUS_SUCCESS && text != nullptr) return text;
  return absl::StrCat(status_name(status), " (0x", absl::Hex(static_cast<uint32_t>(status)), ")");
}

}  // namespace

BackendDiscovery discover(const DiscoveryOptions& options) {
  BackendDiscovery out;
  absl::StatusOr<HsaApi> loaded = load_hsa_runtime(options.library);
  if (!loaded.ok()) {
    out.log.push_back(absl::StrCat(loaded.status().code() == absl::StatusCode::kNotFound
                                       ? "hsa: library missing: "
                                       : "hsa: unusable runtime: ",
                                   loaded.status().message()));
    return out;
  }
  auto api = std::make_shared<const HsaApi>(*std::move(loaded));

  // Fails without the amdgpu kernel driver (/dev/kfd), as on machines
  // without an AMD GPU.
  if (hsa_status_t s = api->hsa_init(); s != HSA_STATUS_SUCCESS) {
    out.log.push_back(
        absl::StrCat("hsa: hsa_init failed (no AMD GPU driver?): ", describe(*api, s)));
    return out;
  }
  Agents agents;
  agents.api = api.get();
  if (hsa_status_t s = api->hsa_iterate_agents(visit_agent, &agents); s != HSA_STATUS_SUCCESS) {
    out.log.push_back(absl::StrCat("hsa: hsa_iterate_agents failed: ", describe(*api, s)));
    api->hsa_shut_down();
    return out;
  }
  if (agents.gpus.empty() || agents.cpus.empty()) {
    out.log.push_back(agents.gpus.empty()
                          ? absl::StrCat("hsa: no GPU agent (", agents.cpus.size(),
                                         " CPU agents) via ", api->origin)
                          : "hsa: no CPU agent to hold kernel arguments and copies");
    api->hsa_shut_down();
    return out;
  }
  // The runtime stays initialised for as long as kad runs: devices use it.
  for (size_t i = 0; i < agents.gpus.size(); ++i) {
    const std::string id = absl::StrCat("hsa:", i);
    absl::StatusOr<std::unique_ptr<HsaDevice>> dev =
        HsaDevice::create(api, agents.gpus[i], agents.cpus[0], id);
    if (!dev.ok()) {
      out.log.push_back(absl::StrCat("hsa: ", id, " unusable: ", dev.status().message()));
      continue;
    }
    out.log.push_back(absl::StrCat("hsa: ", id, " \"", (*dev)->info().name, "\" ", (*dev)->isa(),
                                   " via ", api->origin));
    out.devices.push_back(*std::move(dev));
  }
  return out;
}

}  // namespace kad::hsa
