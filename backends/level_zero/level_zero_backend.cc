#include "backends/level_zero/level_zero_backend.h"

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backends/level_zero/level_zero_device.h"
#include "backends/level_zero/level_zero_status.h"
#include "core/driver_scope.h"

namespace kad::level_zero {
namespace {

// Why zeInit failed, in the terms of someone setting up the machine. The
// loader answers ZE_RESULT_ERROR_UNINITIALIZED when it loaded no driver: no
// driver library (Intel's compute runtime, libze_intel_gpu.so.1) is
// installed, or every one found no device.
std::string no_driver_line(const char* loader, ze_result_t result) {
  if (result == ZE_RESULT_ERROR_UNINITIALIZED) {
    return absl::StrFormat(
        "level_zero: no driver: %s loaded, but zeInit returned %s (0x%08x): no Level Zero "
        "driver (such as Intel's compute runtime, libze_intel_gpu.so.1) is installed, or none "
        "found a device",
        loader, result_name(result), static_cast<uint32_t>(result));
  }
  return absl::StrCat("level_zero: no driver: ", ze_status(result, "zeInit").message());
}

}  // namespace

BackendDiscovery discover(const DiscoveryOptions& options) {
  BackendDiscovery out;
  absl::StatusOr<LevelZeroApi> loaded = load_loader(options.loader);
  if (!loaded.ok()) {
    out.log.push_back(absl::StrCat("level_zero: loader unavailable: ", loaded.status().message()));
    return out;
  }
  auto api = std::make_shared<const LevelZeroApi>(*std::move(loaded));
  DriverScope scope;

  // 0: every kind of device the drivers offer (GPUs, and others should they come).
  if (ze_result_t r = api->zeInit(0); r != ZE_RESULT_SUCCESS) {
    out.log.push_back(no_driver_line(options.loader, r));
    return out;
  }
  uint32_t driver_count = 0;
  ze_result_t r = api->zeDriverGet(&driver_count, nullptr);
  if (r != ZE_RESULT_SUCCESS || driver_count == 0) {
    out.log.push_back(
        absl::StrFormat("level_zero: no driver: zeDriverGet lists none (%s)", result_name(r)));
    return out;
  }
  std::vector<ze_driver_handle_t> drivers(driver_count);
  if (absl::Status s = ze_status(api->zeDriverGet(&driver_count, drivers.data()), "zeDriverGet");
      !s.ok()) {
    out.log.push_back(absl::StrCat("level_zero: no driver: ", s.message()));
    return out;
  }

  size_t devices_seen = 0;
  for (uint32_t d = 0; d < driver_count; ++d) {
    uint32_t count = 0;
    if (api->zeDeviceGet(drivers[d], &count, nullptr) != ZE_RESULT_SUCCESS || count == 0) continue;
    std::vector<ze_device_handle_t> devices(count);
    if (api->zeDeviceGet(drivers[d], &count, devices.data()) != ZE_RESULT_SUCCESS) continue;
    for (uint32_t i = 0; i < count; ++i) {
      ++devices_seen;
      const std::string id = absl::StrCat("level_zero:", d, ":", i);
      absl::StatusOr<std::unique_ptr<LevelZeroDevice>> dev =
          LevelZeroDevice::create(api, drivers[d], devices[i], id);
      if (!dev.ok()) {
        out.log.push_back(absl::StrCat("level_zero: ", id, " unusable: ", dev.status().message()));
        continue;
      }
      out.log.push_back(absl::StrFormat("level_zero: %s \"%s\" (driver %s, %s) via %s", id,
                                        (*dev)->info().name, (*dev)->info().driver_version,
                                        (*dev)->info().platform, api->origin));
      out.devices.push_back(std::move(*dev));
    }
  }
  if (devices_seen == 0) {
    out.log.push_back(absl::StrFormat("level_zero: no device: %d driver%s, none lists a device",
                                      driver_count, driver_count == 1 ? "" : "s"));
  }
  return out;
}

}  // namespace kad::level_zero
