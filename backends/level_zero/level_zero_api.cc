#include "backends/level_zero/level_zero_api.h"

#include <dlfcn.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kad::level_zero {

absl::StatusOr<LevelZeroApi> load_loader(const char* library) {
  // Never closed: drivers do not support being unloaded while the process runs.
  void* handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot load ", library, ": ", dlerror()));
  }
  LevelZeroApi api;
  api.origin = library;
#define KAD_LOAD_FUNCTION(name)                                                 \
  api.name = reinterpret_cast<decltype(api.name)>(dlsym(handle, #name));        \
  if (api.name == nullptr) {                                                    \
    return absl::InternalError(absl::StrCat(library, " has no symbol " #name)); \
  }
  KAD_LEVEL_ZERO_FUNCTIONS(KAD_LOAD_FUNCTION)
#undef KAD_LOAD_FUNCTION
  return api;
}

}  // namespace kad::level_zero
