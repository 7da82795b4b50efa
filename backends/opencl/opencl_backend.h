// Finds every OpenCL device: all platforms the ICD loader knows, plus PoCL
// loaded directly as the embedded default CPU device when the loader does not
// already list it (so PoCL appears once, never twice).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"

namespace kad::opencl {

inline constexpr char kPoclPlatformName[] = "Portable Computing Language";

using Discovery = BackendDiscovery;

struct DiscoveryOptions {
  const char* icd_loader = "libOpenCL.so.1";
  const char* embedded_pocl = "libpocl.so.2";  // null: no embedded default
};

Discovery discover(const DiscoveryOptions& options = {});

// Where PoCL keeps the programs it builds ($POCL_CACHE_DIR, else
// $XDG_CACHE_HOME/pocl/kcache, else ~/.cache/pocl/kcache): a process that
// builds kernels with it must be able to write there. Empty when none.
std::string pocl_cache_folder();

}  // namespace kad::opencl
