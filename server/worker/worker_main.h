// The worker side of DESIGN §8: `kad --worker-fd N --worker-device ID` runs
// one device for its daemon, on the socket it was started with, and does
// what the daemon asks (worker_protocol.h) until the daemon hangs up. Client
// kernels run here, never in the daemon: a kernel that crashes or loops
// ends only this process.
#pragma once

#include "core/backend.h"
#include "server/worker/worker_confinement.h"

namespace kad::server::worker {

// Prepares the process to run untrusted code: it dies with its parent, dumps
// no core, keeps no descriptor but 0-2 and `fd`, and an abort() ends it
// with kAbortedExitStatus (abort_status.h). Call first.
void harden_worker_process(int fd);

// Serves the daemon on `fd` with `device` (null: the worker cannot serve,
// and `why` says so in the hello), telling it the walls it runs behind.
// `kernels_run_in_enqueue`: the device's driver runs a kernel inside its
// enqueue (PoCL's basic), so each queue gets a thread for its long launches
// (launch_executor.h), which runs those of several work-groups on
// `wide_device` if one is given (PoCL's pthread, on the same memory).
// Returns the process's exit code.
int serve_worker(int fd, Device* device, const absl::Status& why, const Confinement& walls,
                 bool kernels_run_in_enqueue = false, Device* wide_device = nullptr);

}  // namespace kad::server::worker
