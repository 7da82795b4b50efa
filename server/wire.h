// Conversions between kad.v1 messages and core's types, with the checks a
// request must pass before it reaches the engine. Launch conversions write
// into fixed-size storage: they allocate nothing.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/backend.h"
#include "core/kernel_signature.h"
#include "core/launch_request.h"
#include "kad/v1/kad.pb.h"

namespace kad::server {

absl::Status to_ndrange(const v1::NdRange& wire, NdRange* out);
absl::Status to_dims(const v1::Workgroup& wire, Dims* out);
// Buffer arguments carry their handle in `bits` until the engine resolves them.
absl::Status to_kernel_arg(const v1::KernelArg& wire, size_t index, KernelArg* out);
absl::StatusOr<ScalarType> to_scalar_type(v1::ScalarType wire);
absl::StatusOr<KernelSignature> to_signature(const v1::GetKernelRequest& wire);
absl::StatusOr<ModuleFormat> to_module_format(v1::ModuleFormat wire);

void to_wire(const DeviceInfo& info, bool is_default, v1::Device* out);
v1::ScalarType to_wire(ScalarType type);

}  // namespace kad::server
