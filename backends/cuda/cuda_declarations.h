// kad's own declarations of the CUDA Driver API subset it uses: types,
// constants and the list of entry points (name, exported symbol, signature).
// Own, because Debian ships no cuda.h (the toolkit is non-free); where the
// toolkit is installed, cuda_header_check.cc checks every line here against
// cuda.h at compile time (sizes, values, and the versioned symbols such as
// cuMemAlloc_v2 that cuda.h maps the plain names to).
#pragma once

#include <cstddef>

namespace kad::cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;
using CUoccupancyB2DSize = size_t (*)(int block_size);

inline constexpr CUresult CUDA_SUCCESS = 0;
inline constexpr CUresult CUDA_ERROR_STUB_LIBRARY = 34;
inline constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
inline constexpr CUresult CUDA_ERROR_NOT_READY = 600;

// CUdevice_attribute
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1;
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X = 2;
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y = 3;
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z = 4;
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X = 5;
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y = 6;
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z = 7;
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8;
inline constexpr int CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10;
inline constexpr int CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
inline constexpr int CU_DEVICE_ATTRIBUTE_INTEGRATED = 18;
inline constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
inline constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;

// CUfunction_attribute
inline constexpr int CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0;
inline constexpr int CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1;
inline constexpr int CU_FUNC_ATTRIBUTE_NUM_REGS = 4;

// CUjit_option
inline constexpr int CU_JIT_THREADS_PER_BLOCK = 1;
inline constexpr int CU_JIT_WALL_TIME = 2;
inline constexpr int CU_JIT_INFO_LOG_BUFFER = 3;
inline constexpr int CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4;
inline constexpr int CU_JIT_ERROR_LOG_BUFFER = 5;
inline constexpr int CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6;
inline constexpr int CU_JIT_OPTIMIZATION_LEVEL = 7;

inline constexpr unsigned CU_STREAM_NON_BLOCKING = 1;
inline constexpr unsigned CU_EVENT_DISABLE_TIMING = 2;

// X(name, symbol, signature): the name kad calls, the symbol libcuda exports.
#define KAD_CUDA_FUNCTIONS(X)                                                                  \
  X(cuInit, "cuInit", CUresult(unsigned))                                                      \
  X(cuDriverGetVersion, "cuDriverGetVersion", CUresult(int*))                                  \
  X(cuGetErrorName, "cuGetErrorName", CUresult(CUresult, const char**))                        \
  X(cuGetErrorString, "cuGetErrorString", CUresult(CUresult, const char**))                    \
  X(cuDeviceGetCount, "cuDeviceGetCount", CUresult(int*))                                      \
  X(cuDeviceGet, "cuDeviceGet", CUresult(CUdevice*, int))                                      \
  X(cuDeviceGetName, "cuDeviceGetName", CUresult(char*, int, CUdevice))                        \
  X(cuDeviceGetAttribute, "cuDeviceGetAttribute", CUresult(int*, int, CUdevice))               \
  X(cuDeviceTotalMem, "cuDeviceTotalMem_v2", CUresult(size_t*, CUdevice))                      \
  X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", CUresult(CUcontext*, CUdevice))      \
  X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", CUresult(CUdevice))             \
  X(cuCtxSetCurrent, "cuCtxSetCurrent", CUresult(CUcontext))                                   \
  X(cuModuleLoadDataEx, "cuModuleLoadDataEx",                                                  \
    CUresult(CUmodule*, const void*, unsigned, int*, void**))                                  \
  X(cuModuleUnload, "cuModuleUnload", CUresult(CUmodule))                                      \
  X(cuModuleGetFunction, "cuModuleGetFunction", CUresult(CUfunction*, CUmodule, const char*))  \
  X(cuFuncGetAttribute, "cuFuncGetAttribute", CUresult(int*, int, CUfunction))                 \
  X(cuOccupancyMaxPotentialBlockSize, "cuOccupancyMaxPotentialBlockSize",                      \
    CUresult(int*, int*, CUfunction, CUoccupancyB2DSize, size_t, int))                         \
  X(cuMemAlloc, "cuMemAlloc_v2", CUresult(CUdeviceptr*, size_t))                               \
  X(cuMemFree, "cuMemFree_v2", CUresult(CUdeviceptr))                                          \
  X(cuMemsetD8, "cuMemsetD8_v2", CUresult(CUdeviceptr, unsigned char, size_t))                 \
  X(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2",                                                 \
    CUresult(CUdeviceptr, const void*, size_t, CUstream))                                      \
  X(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", CUresult(void*, CUdeviceptr, size_t, CUstream)) \
  X(cuStreamCreate, "cuStreamCreate", CUresult(CUstream*, unsigned))                           \
  X(cuStreamDestroy, "cuStreamDestroy_v2", CUresult(CUstream))                                 \
  X(cuStreamSynchronize, "cuStreamSynchronize", CUresult(CUstream))                            \
  X(cuEventCreate, "cuEventCreate", CUresult(CUevent*, unsigned))                              \
  X(cuEventDestroy, "cuEventDestroy_v2", CUresult(CUevent))                                    \
  X(cuEventRecord, "cuEventRecord", CUresult(CUevent, CUstream))                               \
  X(cuEventQuery, "cuEventQuery", CUresult(CUevent))                                           \
  X(cuEventSynchronize, "cuEventSynchronize", CUresult(CUevent))                               \
  X(cuLaunchKernel, "cuLaunchKernel",                                                          \
    CUresult(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, \
             CUstream, void**, void**))

}  // namespace kad::cuda
