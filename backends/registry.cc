#include "backends/registry.h"

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

DeviceRegistry discover_devices() {
  DeviceRegistry registry;
  opencl::Discovery cl = opencl::discover();
  for (auto& d : cl.devices) registry.devices.push_back(std::move(d));
  registry.log = std::move(cl.log);
  return registry;
}

}  // namespace kad
