// Turns a Level Zero result into a status naming the call and the result, so
// that no call site formats driver errors by hand.
#pragma once

#include <level_zero/ze_api.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace kad::level_zero {

// "ZE_RESULT_ERROR_MODULE_BUILD_FAILURE"; "unknown Level Zero result" for a
// value the headers kad was built with do not name.
absl::string_view result_name(ze_result_t result);

// OkStatus for ZE_RESULT_SUCCESS, else a status
// "<call>: <result name> (0x<hex>)[: context]" whose code follows the result
// (out of memory -> RESOURCE_EXHAUSTED, device lost -> UNAVAILABLE, a bad
// kernel name -> NOT_FOUND, invalid sizes and build failures -> INVALID_ARGUMENT).
absl::Status ze_status(ze_result_t result, absl::string_view call, absl::string_view context = {});

}  // namespace kad::level_zero
