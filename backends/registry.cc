#include "backends/registry.h"

#include <cstdlib>
#include <cstring>
#include <functional>

#include "backends/cuda/cuda_backend.h"
#include "backends/hsa/hsa_backend.h"
#include "backends/level_zero/level_zero_backend.h"
#include "backends/null/null_backend.h"
#include "backends/opencl/opencl_backend.h"

namespace kad {

Device* DeviceRegistry::default_device() const {
  for (const auto& d : devices)
    if (d->info().is_cpu) return d.get();
  return devices.empty() ? nullptr : devices.front().get();
}

Device* DeviceRegistry::find(absl::string_view id) const {
  for (const auto& d : devices)
    if (d->info().id == id) return d.get();
  return nullptr;
}

DeviceRegistry discover_devices(const DiscoveryConfig& config) {
  DeviceRegistry registry;
  // Every backend is asked; one whose library or hardware is missing adds a
  // log line and no devices.
  cuda::DiscoveryOptions cuda_options;
  cuda_options.device.prefer_blocks = config.cuda_prefer_blocks;
  const struct {
    const char* name;
    std::function<BackendDiscovery()> discover;
  } kBackends[] = {
      {"opencl", [&] { return opencl::discover({.timed_queues = config.timed_queues}); }},
      {"cuda", [&] { return cuda::discover(cuda_options); }},
      {"hsa", [] { return hsa::discover(); }},
      {"level_zero", [] { return level_zero::discover(); }}};
  for (const auto& backend : kBackends) {
    if (!config.only_backend.empty() && config.only_backend != backend.name) continue;
    BackendDiscovery found = backend.discover();
    for (auto& d : found.devices) registry.devices.push_back(std::move(d));
    for (auto& line : found.log) registry.log.push_back(std::move(line));
  }
  const char* env = std::getenv("KAD_NULL_DEVICE");
  const bool null_device = config.null_device || (env != nullptr && std::strcmp(env, "1") == 0);
  if (null_device && (config.only_backend.empty() || config.only_backend == "null")) {
    BackendDiscovery found = null_backend::discover();
    for (auto& d : found.devices) registry.devices.push_back(std::move(d));
    for (auto& line : found.log) registry.log.push_back(std::move(line));
  }
  return registry;
}

void keep_driver_caches_in(const std::string& folder, bool specialize) {
  opencl::keep_pocl_cache_in(folder + "/pocl", specialize);
}

void default_driver_caches_to(const std::string& folder) {
  opencl::default_pocl_cache_to(folder + "/pocl");
}

}  // namespace kad
