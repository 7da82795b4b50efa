#include "backends/cuda/cuda_status.h"

#include "absl/strings/str_cat.h"

namespace kad::cuda {
namespace {

// For when the driver cannot name its own error (the toolkit's stub library
// answers every call, cuGetErrorName included, with CUDA_ERROR_STUB_LIBRARY).
const char* known_error_name(CUresult result) {
  switch (result) {
    case 1:
      return "CUDA_ERROR_INVALID_VALUE";
    case 2:
      return "CUDA_ERROR_OUT_OF_MEMORY";
    case 3:
      return "CUDA_ERROR_NOT_INITIALIZED";
    case 4:
      return "CUDA_ERROR_DEINITIALIZED";
    case 34:
      return "CUDA_ERROR_STUB_LIBRARY";
    case 36:
      return "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER";
    case 46:
      return "CUDA_ERROR_DEVICE_UNAVAILABLE";
    case 100:
      return "CUDA_ERROR_NO_DEVICE";
    case 101:
      return "CUDA_ERROR_INVALID_DEVICE";
    case 200:
      return "CUDA_ERROR_INVALID_IMAGE";
    case 209:
      return "CUDA_ERROR_NO_BINARY_FOR_GPU";
    case 218:
      return "CUDA_ERROR_INVALID_PTX";
    case 222:
      return "CUDA_ERROR_UNSUPPORTED_PTX_VERSION";
    case 400:
      return "CUDA_ERROR_INVALID_HANDLE";
    case 500:
      return "CUDA_ERROR_NOT_FOUND";
    case 600:
      return "CUDA_ERROR_NOT_READY";
    case 700:
      return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case 701:
      return "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES";
    case 719:
      return "CUDA_ERROR_LAUNCH_FAILED";
    default:
      return nullptr;
  }
}

}  // namespace

absl::StatusCode status_code_for(CUresult result) {
  switch (result) {
    case CUDA_SUCCESS:
      return absl::StatusCode::kOk;
    case 1:    // CUDA_ERROR_INVALID_VALUE
    case 200:  // CUDA_ERROR_INVALID_IMAGE
    case 209:  // CUDA_ERROR_NO_BINARY_FOR_GPU
    case 218:  // CUDA_ERROR_INVALID_PTX
    case 222:  // CUDA_ERROR_UNSUPPORTED_PTX_VERSION
    case 300:  // CUDA_ERROR_INVALID_SOURCE
    case 400:  // CUDA_ERROR_INVALID_HANDLE
      return absl::StatusCode::kInvalidArgument;
    case 500:  // CUDA_ERROR_NOT_FOUND (a kernel entry the module lacks)
      return absl::StatusCode::kNotFound;
    case 2:    // CUDA_ERROR_OUT_OF_MEMORY
    case 701:  // CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
      return absl::StatusCode::kResourceExhausted;
    case 3:  // CUDA_ERROR_NOT_INITIALIZED
    case CUDA_ERROR_STUB_LIBRARY:
    case CUDA_ERROR_NO_DEVICE:
    case 46:   // CUDA_ERROR_DEVICE_UNAVAILABLE (exclusive mode, taken)
    case 101:  // CUDA_ERROR_INVALID_DEVICE
      return absl::StatusCode::kUnavailable;
    case 700:  // CUDA_ERROR_ILLEGAL_ADDRESS
    case 702:  // CUDA_ERROR_LAUNCH_TIMEOUT
    case 710:  // CUDA_ERROR_ASSERT
    case 719:  // CUDA_ERROR_LAUNCH_FAILED
      return absl::StatusCode::kAborted;
    default:
      return absl::StatusCode::kInternal;
  }
}

absl::Status cu_status(const CudaApi& api, CUresult result, absl::string_view call,
                       absl::string_view detail) {
  if (result == CUDA_SUCCESS) return absl::OkStatus();
  const char* name = nullptr;
  const char* text = nullptr;
  if (api.cuGetErrorName(result, &name) != CUDA_SUCCESS) name = known_error_name(result);
  if (api.cuGetErrorString(result, &text) != CUDA_SUCCESS) text = nullptr;
  std::string message =
      absl::StrCat(call, " failed: ", name ? name : absl::StrCat("CUresult ", result));
  if (text) absl::StrAppend(&message, " (", text, ")");
  if (!detail.empty()) absl::StrAppend(&message, ": ", detail);
  return absl::Status(status_code_for(result), message);
}

}  // namespace kad::cuda
