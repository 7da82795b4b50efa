// kad::CompileRequest and a compile's result, to and from the worker
// protocol's messages (kad/worker/v1/worker.proto).
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "core/backend.h"
#include "kad/worker/v1/worker.pb.h"

namespace kad::server::worker {

namespace wire = ::kad::worker::v1;

wire::Compile to_message(const CompileRequest& request);

// What a worker rebuilds from a Compile message: a CompileRequest's parts,
// owned.
struct OwnedCompileRequest {
  std::shared_ptr<const Module> module;
  KernelSignature signature;
  Specialization spec;
  SpecializationKey key;
  std::string source;
  std::string options;
  CompileRequest view() const { return {*module, signature, spec, key, source, options}; }
};
absl::StatusOr<OwnedCompileRequest> from_message(const wire::Compile& message);

// A compile's outcome as the worker reports it.
wire::CompileReply to_reply(const absl::StatusOr<std::unique_ptr<CompiledKernel>>& compiled);

struct CompiledKernelInfo {
  KernelLimits limits;
  std::optional<std::vector<KernelParameter>> parameters;
};
// Checks a worker's reply (untrusted): the status it reports, or the
// kernel's limits and parameters, each within what a kernel can have.
absl::StatusOr<CompiledKernelInfo> from_reply(const wire::CompileReply& reply);

// A worker's words, which kad keeps (a compile's failure is remembered per
// key) and passes on to clients: at most kMaxWorkerMessageBytes of them,
// then how many more there were. A worker sets their length, not kad.
inline constexpr size_t kMaxWorkerMessageBytes = 64 << 10;
std::string bounded_message(absl::string_view message);
// The longest type or name of a kernel parameter kad keeps from a worker.
inline constexpr size_t kMaxParameterTextBytes = 1024;

}  // namespace kad::server::worker
