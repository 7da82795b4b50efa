// Finds every Level Zero device (Intel GPUs) through the loader, which is
// dlopen'ed here: a machine without the loader, without a driver or without
// a device gets exactly one log line that says which, and kad runs on.
#pragma once

#include "backends/level_zero/level_zero_api.h"
#include "core/backend.h"

namespace kad::level_zero {

struct DiscoveryOptions {
  const char* loader = kDefaultLoader;  // tests name one that does not exist
};

// Device ids are "level_zero:<driver index>:<device index>", in the loader's
// order (stable across restarts on one machine).
BackendDiscovery discover(const DiscoveryOptions& options = {});

}  // namespace kad::level_zero
