// Turns an HSA status into a status naming the call and the runtime's error.
#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "backends/hsa/hsa_headers.h"

namespace kad::hsa {

// "HSA_STATUS_ERROR_OUT_OF_RESOURCES"; "unknown HSA status" for codes the
// headers do not name.
absl::string_view status_name(hsa_status_t code);

// OkStatus for HSA_STATUS_SUCCESS and HSA_STATUS_INFO_BREAK (an iteration
// stopped on purpose), else "<call>: <name> (0x<code>)[: context]" with a code
// that follows the error: resources -> RESOURCE_EXHAUSTED, bad code objects
// and arguments -> INVALID_ARGUMENT, device faults -> ABORTED, ...
absl::Status hsa_status(hsa_status_t code, absl::string_view call, absl::string_view context = {});

}  // namespace kad::hsa
