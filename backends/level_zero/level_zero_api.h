// The Level Zero entry points kad uses, as one table of function pointers
// filled at start by dlsym from the loader (libze_loader.so.1). Nothing links
// against the loader: a machine without it builds and runs kad all the same.
#pragma once

#include <level_zero/ze_api.h>

#include <string>

#include "absl/status/statusor.h"

// Every function, once: declaration, loading and tests use this list.
#define KAD_LEVEL_ZERO_FUNCTIONS(X)         \
  X(zeInit)                                 \
  X(zeDriverGet)                            \
  X(zeDriverGetProperties)                  \
  X(zeDriverGetApiVersion)                  \
  X(zeDeviceGet)                            \
  X(zeDeviceGetProperties)                  \
  X(zeDeviceGetComputeProperties)           \
  X(zeDeviceGetMemoryProperties)            \
  X(zeDeviceGetModuleProperties)            \
  X(zeDeviceGetCommandQueueGroupProperties) \
  X(zeContextCreate)                        \
  X(zeContextDestroy)                       \
  X(zeMemAllocDevice)                       \
  X(zeMemFree)                              \
  X(zeModuleCreate)                         \
  X(zeModuleDestroy)                        \
  X(zeModuleBuildLogGetString)              \
  X(zeModuleBuildLogDestroy)                \
  X(zeKernelCreate)                         \
  X(zeKernelDestroy)                        \
  X(zeKernelGetProperties)                  \
  X(zeKernelSuggestGroupSize)               \
  X(zeKernelSetGroupSize)                   \
  X(zeKernelSetArgumentValue)               \
  X(zeCommandListCreateImmediate)           \
  X(zeCommandListDestroy)                   \
  X(zeCommandListAppendLaunchKernel)        \
  X(zeCommandListAppendMemoryCopy)          \
  X(zeCommandListAppendMemoryFill)          \
  X(zeEventPoolCreate)                      \
  X(zeEventPoolDestroy)                     \
  X(zeEventCreate)                          \
  X(zeEventDestroy)                         \
  X(zeEventHostSynchronize)                 \
  X(zeEventHostSignal)                      \
  X(zeEventHostReset)

namespace kad::level_zero {

struct LevelZeroApi {
#define KAD_DECLARE_FUNCTION(name) decltype(&::name) name = nullptr;
  KAD_LEVEL_ZERO_FUNCTIONS(KAD_DECLARE_FUNCTION)
#undef KAD_DECLARE_FUNCTION
  std::string origin;  // the library the table came from: "libze_loader.so.1"
};

inline constexpr char kDefaultLoader[] = "libze_loader.so.1";

// Loads the loader. NotFound when the library is absent (with dlerror's
// reason); Internal when a symbol is missing (names it). Does not call zeInit.
absl::StatusOr<LevelZeroApi> load_loader(const char* library = kDefaultLoader);

}  // namespace kad::level_zero
