#include "backends/cuda/cuda_api.h"

#include <dlfcn.h>

#include "absl/strings/str_cat.h"

namespace kad::cuda {

absl::StatusOr<std::shared_ptr<const CudaApi>> CudaApi::load(const char* library) {
  auto api = std::make_shared<CudaApi>();
  api->handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (api->handle == nullptr) {
    const char* why = dlerror();
    return absl::NotFoundError(absl::StrCat(library, " not loaded: ", why ? why : "unknown"));
  }
#define KAD_CUDA_RESOLVE(name, symbol, signature)                                              \
  api->name = reinterpret_cast<std::add_pointer_t<signature>>(dlsym(api->handle, symbol));     \
  if (api->name == nullptr) {                                                                  \
    return absl::NotFoundError(                                                                \
        absl::StrCat(library, " lacks ", symbol, " (a CUDA driver older than kad supports)")); \
  }
  KAD_CUDA_FUNCTIONS(KAD_CUDA_RESOLVE)
#undef KAD_CUDA_RESOLVE
  return std::shared_ptr<const CudaApi>(std::move(api));
}

CudaApi::~CudaApi() {
  if (handle != nullptr) dlclose(handle);
}

}  // namespace kad::cuda
