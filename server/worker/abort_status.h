// A worker that aborts says so (DESIGN §8). A worker is the first process
// of its PID namespace, and Linux delivers no signal such a process sends
// itself unless it handles it: abort()'s SIGABRT is ignored, and glibc's
// last resort, a `hlt` instruction, ends it with SIGSEGV. kad would then
// tell the session of a segmentation fault where a driver's assertion or
// fatal error (LLVM's, PoCL's) ended it. A handler for SIGABRT alone does
// not help: LLVM installs its own, which returns, after which glibc's
// abort() puts back the default and ends at the `hlt` all the same.
//
// So the worker recognises that `hlt` in its SIGSEGV handler and exits with
// kAbortedExitStatus, which kad reads as "aborted"; every other fault goes
// on to the handler before it (LLVM's) or the default, as before.
#pragma once

namespace kad::server::worker {

// How a worker that aborted exits: 128 + SIGABRT, as a shell would say.
inline constexpr int kAbortedExitStatus = 134;

// Installs the SIGSEGV handler above (x86-64; elsewhere nothing), in the
// first process of a PID namespace only. Call before client code runs.
void report_aborts_by_exit_status();

}  // namespace kad::server::worker
