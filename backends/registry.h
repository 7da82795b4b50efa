// Every backend's devices, found once when kad starts. A backend whose library
// or hardware is missing contributes a log line instead of devices.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"

namespace kad {

struct DeviceRegistry {
  std::vector<std::unique_ptr<Device>> devices;
  std::vector<std::string> log;

  // The embedded default: the first CPU device (PoCL), else the first device.
  Device* default_device() const;
  Device* find(absl::string_view id) const;
};

// Settings of the backends that have any (kad's flags).
struct DiscoveryConfig {
  bool cuda_prefer_blocks = false;  // CUDA tuning: more, smaller blocks (see occupancy_threads)
  // Only the backend that a device id starts with ("opencl" for
  // opencl:pocl:0): a worker serves one device and need not wait for the
  // others' drivers to start. Empty: every backend.
  std::string only_backend;
  // The null device, null:0 (backends/null/): off unless asked for (kad
  // --null-device, or KAD_NULL_DEVICE=1 in the environment, which the bench's
  // --device null:0 sets).
  bool null_device = false;
  // Queues time their launches on the device (Queue::device_times, what
  // kad's fair-share scheduler charges a tenant). A worker's queues, whose
  // times nobody asks, go without: PoCL reads the clock three times per
  // launch of a timed queue.
  bool timed_queues = true;
};

DeviceRegistry discover_devices(const DiscoveryConfig& config = {});

// Makes every driver of this process keep what it builds under `folder`
// (its own, writable to it alone), before discovery starts the drivers: a
// worker shares no writable driver cache with another session's (DESIGN §8).
// `specialize`: see opencl::keep_pocl_cache_in.
void keep_driver_caches_in(const std::string& folder, bool specialize);

// Drivers whose caches the environment does not place keep them under
// `folder`: a service's user has no home for them (PoCL finds no device
// when it cannot make its cache). What the environment says wins.
void default_driver_caches_to(const std::string& folder);

}  // namespace kad
