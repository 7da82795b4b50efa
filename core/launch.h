// The generic launch (DESIGN §3): partition, select, compile, tune, launch.
// One implementation for every backend; each stage is a function of its own.
#pragma once

#include "absl/status/statusor.h"
#include "core/backend.h"
#include "core/kernel.h"
#include "core/kernel_cache.h"
#include "core/launch_request.h"

namespace kad {

// A compile that a launch needs and left to its caller (see launch()).
struct DeferredCompile {
  bool needed = false;
  Device* device = nullptr;
  Specialization spec;
};

// Launches `kernel` on `queue`'s device. Returns once the launch is enqueued;
// wait on the returned event. A warm launch allocates nothing in kad's code.
//
// With `defer`, a launch whose specialisation is not compiled yet compiles
// nothing: it sets `defer` and returns before enqueueing (no event). A caller
// that holds a lock others need (a session's) then compiles with
// Kernel::specialization after releasing it, and launches again.
absl::StatusOr<LaunchResult> launch(Kernel& kernel, Queue& queue, KernelCache& cache,
                                    const LaunchRequest& request, DeferredCompile* defer = nullptr);

}  // namespace kad
