#include "server/worker/fault_witness.h"

#include <signal.h>

namespace kad::server::worker {
namespace {

constexpr int kFaults[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE};
constexpr int kNumFaults = sizeof(kFaults) / sizeof(kFaults[0]);

// Lock-free, so the handler may store to it.
static_assert(std::atomic<uint64_t>::is_always_lock_free);

// The thread's running launch: an initial-exec TLS slot of the executable,
// which a signal handler may read.
thread_local std::atomic<uint64_t>* t_faulted = nullptr;
thread_local uint64_t t_launch = 0;

struct sigaction g_before[kNumFaults] = {};

// The handler is installed for kFaults alone, so `sig` is one of them.
int index_of(int sig) {
  int i = 0;
  while (i + 1 < kNumFaults && kFaults[i] != sig) ++i;
  return i;
}

void on_fault(int sig, siginfo_t* info, void* context) {
  // Faults of this thread's own instructions only (si_code > 0): a signal
  // another process sent names no launch of ours.
  if (info != nullptr && info->si_code > 0 && t_faulted != nullptr && t_launch != 0)
    t_faulted->store(t_launch, std::memory_order_release);
  const struct sigaction& before = g_before[index_of(sig)];
  if ((before.sa_flags & SA_SIGINFO) != 0 && before.sa_sigaction != nullptr) {
    before.sa_sigaction(sig, info, context);
    return;
  }
  if (before.sa_handler != SIG_DFL && before.sa_handler != SIG_IGN) {
    before.sa_handler(sig);
    return;
  }
  // The default: put it back; the faulting instruction runs again on return
  // and the fault ends the process as it would have. A signal that was sent,
  // not caused, is sent again.
  sigaction(sig, &before, nullptr);
  if (info == nullptr || info->si_code <= 0) raise(sig);
}

}  // namespace

void install_fault_witness() {
  struct sigaction on {};
  on.sa_sigaction = on_fault;
  // Reset on entry: a fault inside the handler ends the process.
  on.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_NODEFER;
  sigemptyset(&on.sa_mask);
  for (int i = 0; i < kNumFaults; ++i) sigaction(kFaults[i], &on, &g_before[i]);
}

RunningLaunch::RunningLaunch(std::atomic<uint64_t>* faulted, uint64_t launch) {
  t_launch = launch;
  t_faulted = faulted;
}

RunningLaunch::~RunningLaunch() {
  t_faulted = nullptr;
  t_launch = 0;
}

}  // namespace kad::server::worker
