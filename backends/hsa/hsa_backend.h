// Finds the GPU agents of the HSA runtime (AMD GPUs through ROCr). The
// runtime is dlopen'ed: without it, or without a GPU (no /dev/kfd), the
// backend reports why in one log line and kad runs on.
#pragma once

#include "core/backend.h"

namespace kad::hsa {

struct DiscoveryOptions {
  const char* library = "libhsa-runtime64.so.1";
};

// Devices are "hsa:<n>", n counting GPU agents in the runtime's order (the
// kernel driver's node order: stable across restarts on one machine).
BackendDiscovery discover(const DiscoveryOptions& options = {});

}  // namespace kad::hsa
