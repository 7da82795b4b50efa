// Which launch a worker was running when it faulted (DESIGN §8). A worker
// that dies of a fault (a kernel's NULL store, `__builtin_trap()`, a
// division by zero) takes every launch in progress with it, and in a worker
// that runs several queues (a session's, or under `--worker-scope device`
// every session's) kad could not tell which launch was the cause: it named
// each queue's first launch lost.
//
// So a worker thread that runs a kernel says which launch it runs
// (RunningLaunch, around the driver's call), and the handler of a fault on
// that thread writes the launch's number into its queue's progress page
// before the fault ends the process. kad reads the number after the worker
// is gone, and trusts it only to phrase its messages, and only when it names
// a launch that was in progress on that queue.
//
// A kernel that runs on a driver's own threads (PoCL's `pthread`) has no
// witness: its fault names no launch, and kad says what it said before. A
// kernel that takes its worker over can write any number into the pages of
// the worker's queues: in a worker that sessions share (`--worker-scope
// device`, for tenants that trust each other) it could blame another
// session's launch in progress, which is why the number only phrases
// messages and decides nothing.
#pragma once

#include <atomic>
#include <cstdint>

namespace kad::server::worker {

// Installs the handler for SIGSEGV, SIGBUS, SIGILL and SIGFPE: it records the
// faulting thread's launch, if any, then hands the signal to the handler
// installed before it (abort_status.h's, a driver's) or lets the default
// take it. Call once, before client code runs, after report_aborts_by_exit_status().
void install_fault_witness();

// While it lives, a fault on this thread writes `launch` into `*faulted`.
class RunningLaunch {
 public:
  RunningLaunch(std::atomic<uint64_t>* faulted, uint64_t launch);
  ~RunningLaunch();
  RunningLaunch(const RunningLaunch&) = delete;
  RunningLaunch& operator=(const RunningLaunch&) = delete;
};

}  // namespace kad::server::worker
