// The CUDA Driver API, loaded with dlopen from libcuda.so.1 when kad starts,
// so one kad binary runs on machines with and without an NVIDIA driver.
#pragma once

#include <memory>
#include <type_traits>

#include "absl/status/statusor.h"
#include "backends/cuda/cuda_declarations.h"

namespace kad::cuda {

// The driver's entry points, resolved once; shared by every CUDA object.
struct CudaApi {
#define KAD_CUDA_MEMBER(name, symbol, signature) std::add_pointer_t<signature> name = nullptr;
  KAD_CUDA_FUNCTIONS(KAD_CUDA_MEMBER)
#undef KAD_CUDA_MEMBER

  // Opens `library` and resolves every entry point. NOT_FOUND names the
  // library (dlerror's text) or the first missing symbol.
  static absl::StatusOr<std::shared_ptr<const CudaApi>> load(const char* library);

  ~CudaApi();
  void* handle = nullptr;
};

}  // namespace kad::cuda
