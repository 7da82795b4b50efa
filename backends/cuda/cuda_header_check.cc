// Compiled only where the CUDA toolkit's cuda.h is installed: checks kad's
// own declarations of the Driver API (cuda_api.h) against NVIDIA's, so a
// wrong constant or signature fails the build instead of a launch.
#include <cuda.h>

#include <string_view>
#include <type_traits>

#include "backends/cuda/cuda_declarations.h"

namespace kad::cuda {
namespace {

// Same arity, and every parameter and the result of the same size: what the
// calling convention depends on (kad's enums are ints, NVIDIA's are enums).
template <class R1, class... A1, class R2, class... A2>
constexpr bool same_abi(R1 (*)(A1...), R2 (*)(A2...)) {
  if constexpr (sizeof...(A1) != sizeof...(A2)) {
    return false;
  } else {
    return sizeof(R1) == sizeof(R2) && ((sizeof(A1) == sizeof(A2)) && ...);
  }
}

#define KAD_STRINGIFY(x) #x
#define KAD_EXPANDED_NAME(x) KAD_STRINGIFY(x)

// cuda.h maps plain names to versioned symbols (cuMemAlloc -> cuMemAlloc_v2);
// the symbol kad resolves must be the one cuda.h would call.
#define KAD_CUDA_CHECK(name, symbol, signature)                                         \
  static_assert(std::string_view(KAD_EXPANDED_NAME(name)) == symbol,                    \
                #name " resolves to a different symbol in cuda.h");                     \
  static_assert(same_abi(static_cast<std::add_pointer_t<signature>>(nullptr), &::name), \
                #name " has a different signature in cuda.h");
KAD_CUDA_FUNCTIONS(KAD_CUDA_CHECK)
#undef KAD_CUDA_CHECK

static_assert(sizeof(kad::cuda::CUdeviceptr) == sizeof(::CUdeviceptr));
static_assert(sizeof(kad::cuda::CUdevice) == sizeof(::CUdevice));
static_assert(sizeof(kad::cuda::CUresult) == sizeof(::CUresult));

#define KAD_SAME_VALUE(name) static_assert(kad::cuda::name == ::name, #name " differs in cuda.h");
KAD_SAME_VALUE(CUDA_SUCCESS)
KAD_SAME_VALUE(CUDA_ERROR_STUB_LIBRARY)
KAD_SAME_VALUE(CUDA_ERROR_NO_DEVICE)
KAD_SAME_VALUE(CUDA_ERROR_NOT_READY)
KAD_SAME_VALUE(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)
KAD_SAME_VALUE(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)
KAD_SAME_VALUE(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)
KAD_SAME_VALUE(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)
KAD_SAME_VALUE(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)
KAD_SAME_VALUE(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)
KAD_SAME_VALUE(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)
KAD_SAME_VALUE(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)
KAD_SAME_VALUE(CU_DEVICE_ATTRIBUTE_WARP_SIZE)
KAD_SAME_VALUE(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
KAD_SAME_VALUE(CU_DEVICE_ATTRIBUTE_INTEGRATED)
KAD_SAME_VALUE(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
KAD_SAME_VALUE(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
KAD_SAME_VALUE(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)
KAD_SAME_VALUE(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)
KAD_SAME_VALUE(CU_FUNC_ATTRIBUTE_NUM_REGS)
KAD_SAME_VALUE(CU_JIT_THREADS_PER_BLOCK)
KAD_SAME_VALUE(CU_JIT_WALL_TIME)
KAD_SAME_VALUE(CU_JIT_INFO_LOG_BUFFER)
KAD_SAME_VALUE(CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES)
KAD_SAME_VALUE(CU_JIT_ERROR_LOG_BUFFER)
KAD_SAME_VALUE(CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
KAD_SAME_VALUE(CU_JIT_OPTIMIZATION_LEVEL)
KAD_SAME_VALUE(CU_STREAM_NON_BLOCKING)
KAD_SAME_VALUE(CU_EVENT_DISABLE_TIMING)
#undef KAD_SAME_VALUE

// The names cuda_status.cc knows for a driver that cannot name its errors.
static_assert(::CUDA_ERROR_INVALID_VALUE == 1 && ::CUDA_ERROR_OUT_OF_MEMORY == 2 &&
              ::CUDA_ERROR_NOT_INITIALIZED == 3 && ::CUDA_ERROR_DEINITIALIZED == 4 &&
              ::CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER == 36 &&
              ::CUDA_ERROR_DEVICE_UNAVAILABLE == 46 && ::CUDA_ERROR_INVALID_DEVICE == 101 &&
              ::CUDA_ERROR_INVALID_IMAGE == 200 && ::CUDA_ERROR_NO_BINARY_FOR_GPU == 209 &&
              ::CUDA_ERROR_INVALID_PTX == 218 && ::CUDA_ERROR_UNSUPPORTED_PTX_VERSION == 222 &&
              ::CUDA_ERROR_INVALID_SOURCE == 300 && ::CUDA_ERROR_INVALID_HANDLE == 400 &&
              ::CUDA_ERROR_NOT_FOUND == 500 && ::CUDA_ERROR_ILLEGAL_ADDRESS == 700 &&
              ::CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES == 701 && ::CUDA_ERROR_LAUNCH_TIMEOUT == 702 &&
              ::CUDA_ERROR_ASSERT == 710 && ::CUDA_ERROR_LAUNCH_FAILED == 719);

}  // namespace
}  // namespace kad::cuda
