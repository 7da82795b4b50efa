// Reads a string property through any clGet*Info call: the size first, then
// the value, trimmed at its terminating NUL. Empty when the query fails.
#pragma once

#include <cstring>
#include <string>

#include "backends/opencl/cl.h"

namespace kad::opencl {

// `keys` are the call's leading arguments: (device, CL_DEVICE_NAME),
// (program, device, CL_PROGRAM_BUILD_LOG), (kernel, index, CL_KERNEL_ARG_NAME), ...
template <typename Query, typename... Keys>
std::string query_string(Query query, Keys... keys) {
  size_t size = 0;
  if (query(keys..., 0, nullptr, &size) != CL_SUCCESS || size == 0) return {};
  std::string out(size, '\0');
  if (query(keys..., size, out.data(), nullptr) != CL_SUCCESS) return {};
  out.resize(std::strlen(out.c_str()));
  return out;
}

}  // namespace kad::opencl
