#include "server/worker/abort_status.h"

#include <signal.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstdint>

namespace kad::server::worker {
namespace {

struct sigaction g_before {};

void on_fault(int sig, siginfo_t* info, void* context) {
#if defined(__x86_64__)
  // A `hlt` in user mode faults with SI_KERNEL; the instruction is still
  // at the faulting address. (An address that cannot be read faults again
  // here, where the handler is already reset: the process ends with
  // SIGSEGV, as it would have.)
  const auto* uc = static_cast<const ucontext_t*>(context);
  if (info->si_code == SI_KERNEL &&
      *reinterpret_cast<const uint8_t*>(uc->uc_mcontext.gregs[REG_RIP]) == 0xF4)
    _exit(kAbortedExitStatus);
#else
  (void)info;
  (void)context;
#endif
  // Any other fault: the handler before this one (or the default) takes
  // it when the instruction faults again on return.
  sigaction(sig, &g_before, nullptr);
}

}  // namespace

void report_aborts_by_exit_status() {
#if defined(__x86_64__)
  if (getpid() != 1) return;  // abort() ends such a process with SIGABRT itself
  struct sigaction on {};
  on.sa_sigaction = on_fault;
  // Reset to the default on entry: should putting back the handler before
  // fail, the fault that comes again still ends the process.
  on.sa_flags = SA_SIGINFO | SA_RESETHAND;
  sigaction(SIGSEGV, &on, &g_before);
#endif
}

}  // namespace kad::server::worker
