#include "backends/opencl/opencl_api.h"

#include <dlfcn.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kad::opencl {

absl::StatusOr<OpenClApi> load_icd_loader(const char* library) {
  // Never closed: drivers do not support being unloaded while the process runs.
  void* handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot load ", library, ": ", dlerror()));
  }
  OpenClApi api;
  api.origin = library;
#define KAD_LOAD_FUNCTION(name)                                                 \
  api.name = reinterpret_cast<decltype(api.name)>(dlsym(handle, #name));        \
  if (api.name == nullptr) {                                                    \
    return absl::InternalError(absl::StrCat(library, " has no symbol " #name)); \
  }
  KAD_OPENCL_FUNCTIONS(KAD_LOAD_FUNCTION)
#undef KAD_LOAD_FUNCTION
  return api;
}

absl::StatusOr<EmbeddedPlatform> load_embedded_pocl(const char* library) {
  void* handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot load ", library, ": ", dlerror()));
  }
  // PoCL exports the ICD entry point through its extension-function lookup.
  using GetExtension = void* (*)(const char*);
  auto get_extension =
      reinterpret_cast<GetExtension>(dlsym(handle, "clGetExtensionFunctionAddress"));
  if (get_extension == nullptr) {
    return absl::InternalError(absl::StrCat(library, " has no clGetExtensionFunctionAddress"));
  }
  using IcdGetPlatformIds = cl_int (*)(cl_uint, cl_platform_id*, cl_uint*);
  auto get_platforms = reinterpret_cast<IcdGetPlatformIds>(get_extension("clIcdGetPlatformIDsKHR"));
  if (get_platforms == nullptr) {
    return absl::InternalError(absl::StrCat(library, " does not provide clIcdGetPlatformIDsKHR"));
  }
  EmbeddedPlatform out;
  cl_uint count = 0;
  if (get_platforms(1, &out.platform, &count) != CL_SUCCESS || count == 0) {
    return absl::NotFoundError(absl::StrCat(library, " reports no platform"));
  }
  // Every ICD object starts with a pointer to its vendor's dispatch table.
  const cl_icd_dispatch* dispatch = *reinterpret_cast<cl_icd_dispatch* const*>(out.platform);
  out.api.origin = absl::StrCat(library, " (embedded)");
#define KAD_COPY_FUNCTION(name)                                                           \
  out.api.name = reinterpret_cast<decltype(out.api.name)>(dispatch->name);                \
  if (out.api.name == nullptr) {                                                          \
    return absl::InternalError(absl::StrCat(library, "'s dispatch table has no " #name)); \
  }
  KAD_OPENCL_FUNCTIONS(KAD_COPY_FUNCTION)
#undef KAD_COPY_FUNCTION
  return out;
}

}  // namespace kad::opencl
