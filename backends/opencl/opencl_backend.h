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
  bool timed_queues = true;  // queues with profiling (DiscoveryConfig::timed_queues)
};

Discovery discover(const DiscoveryOptions& options = {});

// Where PoCL keeps the programs it builds ($POCL_CACHE_DIR, else
// $XDG_CACHE_HOME/pocl/kcache, else ~/.cache/pocl/kcache). Empty when none.
std::string pocl_cache_folder();

// Makes PoCL, once it starts in this process, keep what it builds in
// `folder` alone, so that it shares no writable cache with anyone (DESIGN
// §8). Unless `specialize`, a program loaded from a driver binary runs the
// binary's generic work-group functions (POCL_WORK_GROUP_SPECIALIZATION=0),
// so that the process compiles nothing; with it, PoCL builds one per
// work-group size at its first launch (about 70 ms each), which runs
// kernels with barriers or local memory faster (up to about 1.7x here).
void keep_pocl_cache_in(const std::string& folder, bool specialize);
// PoCL's cache in `folder` unless POCL_CACHE_DIR names one already.
void default_pocl_cache_to(const std::string& folder);

}  // namespace kad::opencl
