// The generic launch (DESIGN §3): partition, select, compile, tune, launch.
// One implementation for every backend; each stage is a function of its own.
#pragma once

#include "absl/status/statusor.h"
#include "core/backend.h"
#include "core/kernel.h"
#include "core/kernel_cache.h"
#include "core/launch_request.h"

namespace kad {

// Launches `kernel` on `queue`'s device. Returns once the launch is enqueued;
// wait on the returned event. A warm launch allocates nothing in kad's code.
absl::StatusOr<LaunchResult> launch(Kernel& kernel, Queue& queue, KernelCache& cache,
                                    const LaunchRequest& request);

}  // namespace kad
