// CUresult -> absl::Status, with the driver's own name and description of
// the error (cuGetErrorName / cuGetErrorString) and what kad was doing.
#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "backends/cuda/cuda_api.h"

namespace kad::cuda {

// The status code a CUresult maps to at kad's edge: out of memory is
// RESOURCE_EXHAUSTED, bad PTX or arguments INVALID_ARGUMENT, no device
// UNAVAILABLE, a failed kernel ABORTED, the rest INTERNAL.
absl::StatusCode status_code_for(CUresult result);

// OK for CUDA_SUCCESS; else "<call> failed: CUDA_ERROR_X (description): <detail>".
absl::Status cu_status(const CudaApi& api, CUresult result, absl::string_view call,
                       absl::string_view detail = {});

}  // namespace kad::cuda
