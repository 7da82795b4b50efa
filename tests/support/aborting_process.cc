// A process in a worker's place that ends as a driver's fault would end
// it (abort_status_test): `abort` calls abort(); `abort-behind-llvm` does
// so with a SIGABRT and a SIGSEGV handler installed after kad's, each of
// which puts back the one before and returns, as LLVM's do; `fault`
// stores through a null pointer. Each first sets up what kad's workers do.
#include <signal.h>

#include <cstdlib>
#include <cstring>

#include "server/worker/abort_status.h"
#include "server/worker/fault_witness.h"

namespace {

struct sigaction g_before_abort {
}, g_before_fault{};

void like_llvm(int sig) {
  sigaction(SIGABRT, &g_before_abort, nullptr);
  sigaction(SIGSEGV, &g_before_fault, nullptr);
  (void)sig;
}

}  // namespace

int main(int argc, char** argv) {
  kad::server::worker::report_aborts_by_exit_status();
  kad::server::worker::install_fault_witness();
  const char* mode = argc > 1 ? argv[1] : "";
  if (std::strcmp(mode, "abort-behind-llvm") == 0) {
    struct sigaction on {};
    on.sa_handler = like_llvm;
    sigaction(SIGABRT, &on, &g_before_abort);
    sigaction(SIGSEGV, &on, &g_before_fault);
  }
  if (std::strcmp(mode, "fault") == 0) {
    volatile int* nowhere = nullptr;
    *nowhere = 1;
  }
  std::abort();
}
