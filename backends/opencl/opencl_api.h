// The OpenCL entry points kad uses, as one table of function pointers filled
// at start: from the ICD loader (libOpenCL.so.1) by dlsym, or from a
// platform's own ICD dispatch table when PoCL is loaded directly as the
// embedded default. Nothing links against libOpenCL.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "backends/opencl/cl.h"

// Every function, once: declaration, loading and tests use this list.
#define KAD_OPENCL_FUNCTIONS(X) \
  X(clGetPlatformIDs)           \
  X(clGetPlatformInfo)          \
  X(clGetDeviceIDs)             \
  X(clGetDeviceInfo)            \
  X(clCreateContext)            \
  X(clReleaseContext)           \
  X(clCreateCommandQueue)       \
  X(clReleaseCommandQueue)      \
  X(clCreateBuffer)             \
  X(clReleaseMemObject)         \
  X(clCreateProgramWithSource)  \
  X(clCreateProgramWithBinary)  \
  X(clBuildProgram)             \
  X(clGetProgramBuildInfo)      \
  X(clGetProgramInfo)           \
  X(clReleaseProgram)           \
  X(clCreateKernel)             \
  X(clGetKernelInfo)            \
  X(clGetKernelArgInfo)         \
  X(clGetKernelWorkGroupInfo)   \
  X(clReleaseKernel)            \
  X(clSetKernelArg)             \
  X(clEnqueueNDRangeKernel)     \
  X(clEnqueueWriteBuffer)       \
  X(clEnqueueFillBuffer)        \
  X(clEnqueueReadBuffer)        \
  X(clWaitForEvents)            \
  X(clGetEventInfo)             \
  X(clGetEventProfilingInfo)    \
  X(clSetEventCallback)         \
  X(clRetainEvent)              \
  X(clReleaseEvent)             \
  X(clFlush)                    \
  X(clFinish)

namespace kad::opencl {

struct OpenClApi {
#define KAD_DECLARE_FUNCTION(name) decltype(&::name) name = nullptr;
  KAD_OPENCL_FUNCTIONS(KAD_DECLARE_FUNCTION)
#undef KAD_DECLARE_FUNCTION
  std::string origin;  // "libOpenCL.so.1" or "libpocl.so.2 (embedded)"
};

// Loads the ICD loader. NotFound when the library is absent; Internal when a
// symbol is missing (names it).
absl::StatusOr<OpenClApi> load_icd_loader(const char* library = "libOpenCL.so.1");

// Loads PoCL directly and returns its platforms' dispatch table, for machines
// where PoCL is not registered with the ICD loader.
struct EmbeddedPlatform {
  OpenClApi api;
  cl_platform_id platform = nullptr;
};
absl::StatusOr<EmbeddedPlatform> load_embedded_pocl(const char* library = "libpocl.so.2");

}  // namespace kad::opencl
