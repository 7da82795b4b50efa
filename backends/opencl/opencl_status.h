// Turns an OpenCL error code into a status naming the call and the error.
#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "backends/opencl/cl.h"

namespace kad::opencl {

// "CL_INVALID_WORK_GROUP_SIZE".
absl::string_view error_name(cl_int code);

// OkStatus for CL_SUCCESS, else a status "<call>: <error name> (<code>)[: context]"
// whose code follows the error (resource errors -> RESOURCE_EXHAUSTED, ...).
absl::Status cl_status(cl_int code, absl::string_view call, absl::string_view context = {});

}  // namespace kad::opencl
