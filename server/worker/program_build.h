// A kernel's program binary, built by a compile worker started for that
// one build (DESIGN §8), or found in kad's code cache, which only the daemon
// writes: a restarted daemon builds nothing it built before, and no process
// in which a client's code ran ever wrote a binary that another loads.
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "core/backend.h"
#include "server/worker/stoppable_build.h"
#include "server/worker/worker_codec.h"
#include "server/worker/worker_pool.h"
#include "server/worker/worker_protocol.h"

namespace kad::server::worker {

// The code cache's key of `request`'s program binary on `device`, built by
// the driver `variant` names (WorkerOptions::build_variant; empty: PoCL's
// own default).
std::string program_binary_key(const DeviceInfo& device, const std::string& variant,
                               const CompileRequest& request);

// `request` as a worker.v1.Compile, with the code kad's tools lower for it
// (`lowering`: kad's own device, never a worker's), for a compile worker.
absl::StatusOr<wire::Compile> compile_message(Device& lowering, const CompileRequest& request);

// The build kept under `key` in kad's code cache, if one is there that
// worked and holds a program binary.
std::optional<wire::CompileReply> cached_build(const std::string& key);

// `message` (a serialized worker.v1.Compile of the kernel `entry`), built by
// `op` (kCompile: for the worker's device; kCompileWide: for the wide device
// beside it) in a compile worker of its own on `device`, unless the code
// cache holds it under `key`: the worker's reply, with the program binary
// where the device keeps them, which is then kept under `key`. A build
// that `stoppable` stops ends CANCELLED.
absl::StatusOr<wire::CompileReply> build_program(WorkerPool& pool, const DeviceInfo& device,
                                                 const std::string& key, Op op,
                                                 const std::string& entry,
                                                 const std::string& message,
                                                 StoppableBuild* stoppable = nullptr);

}  // namespace kad::server::worker
