// A worker thread that faults while it runs a launch writes the launch's
// number where kad reads it (fault_witness.h), and still ends with the
// fault's signal; a fault outside a launch, or a signal another process
// sends, names no launch.
#include "server/worker/fault_witness.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <functional>

#include "gtest/gtest.h"
#include "server/worker/abort_status.h"

namespace kad {
namespace {

using server::worker::RunningLaunch;

struct Ended {
  int signal = 0;        // what ended the child (0: it exited)
  uint64_t faulted = 0;  // what its handler wrote
};

// Runs `body` in a child process that installs the witness as a worker does
// (after the abort handler), with the page it may write into shared with us.
Ended in_child(const std::function<void(std::atomic<uint64_t>*)>& body,
               bool signal_it_from_here = false) {
  void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  EXPECT_NE(page, MAP_FAILED);
  auto* faulted = new (page) std::atomic<uint64_t>(0);
  const pid_t child = fork();
  if (child == 0) {
    server::worker::report_aborts_by_exit_status();
    server::worker::install_fault_witness();
    body(faulted);
    _exit(0);
  }
  if (signal_it_from_here) {
    usleep(100'000);
    kill(child, SIGSEGV);
  }
  int status = 0;
  waitpid(child, &status, 0);
  Ended ended{WIFSIGNALED(status) ? WTERMSIG(status) : 0, faulted->load()};
  munmap(page, 4096);
  return ended;
}

void null_store() {
  volatile int* nowhere = nullptr;
  *nowhere = 1;
}

TEST(FaultWitness, AFaultWhileALaunchRunsNamesItAndStillEndsTheProcess) {
  const Ended e = in_child([](std::atomic<uint64_t>* faulted) {
    const RunningLaunch running(faulted, 7);
    null_store();
  });
  EXPECT_EQ(e.signal, SIGSEGV);
  EXPECT_EQ(e.faulted, 7u);
}

TEST(FaultWitness, EveryKindOfFaultIsWitnessed) {
  const Ended trap = in_child([](std::atomic<uint64_t>* faulted) {
    const RunningLaunch running(faulted, 3);
    __builtin_trap();
  });
  EXPECT_EQ(trap.signal, SIGILL);
  EXPECT_EQ(trap.faulted, 3u);
  const Ended divide = in_child([](std::atomic<uint64_t>* faulted) {
    const RunningLaunch running(faulted, 4);
    // Both read at run time: the compiler cannot turn the division into a
    // comparison, as it does 1 / x.
    volatile int numerator = 7, zero = 0;
    volatile int x = numerator / zero;
    (void)x;
  });
  EXPECT_EQ(divide.signal, SIGFPE);
  EXPECT_EQ(divide.faulted, 4u);
}

TEST(FaultWitness, AFaultAfterTheLaunchEndedNamesNone) {
  const Ended e = in_child([](std::atomic<uint64_t>* faulted) {
    { const RunningLaunch running(faulted, 9); }
    null_store();
  });
  EXPECT_EQ(e.signal, SIGSEGV);
  EXPECT_EQ(e.faulted, 0u);
}

TEST(FaultWitness, ASignalSentByAnotherProcessNamesNoLaunchAndStillEndsIt) {
  const Ended e = in_child(
      [](std::atomic<uint64_t>* faulted) {
        const RunningLaunch running(faulted, 5);
        for (;;) pause();
      },
      /*signal_it_from_here=*/true);
  EXPECT_EQ(e.signal, SIGSEGV);
  EXPECT_EQ(e.faulted, 0u);
}

}  // namespace
}  // namespace kad
