// A worker that aborts says so (abort_status.h): as the first process of
// its PID namespace it ignores its own SIGABRT and would end with SIGSEGV
// at glibc's last resort; kad's workers exit with kAbortedExitStatus
// instead, which kad reads as "aborted", even behind handlers that return
// as LLVM's do. A real fault still ends it with SIGSEGV.
#include "server/worker/abort_status.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/worker/namespaced_spawn.h"
#include "server/worker/worker_process.h"

extern char** environ;

namespace kad {
namespace {

// How the aborting process ended in `mode`, started as kad starts a worker
// (-1: namespaces cannot be made here).
int wait_status_in_own_namespaces(const std::string& mode) {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return -1;
  std::string path = KAD_ABORTING_PROCESS_PATH, m = mode;
  char* argv[] = {path.data(), m.data(), nullptr};
  absl::StatusOr<pid_t> pid =
      server::worker::spawn_in_own_namespaces(path.c_str(), argv, environ, fds[1]);
  close(fds[1]);
  close(fds[0]);
  if (!pid.ok()) return -1;
  int status = 0;
  waitpid(*pid, &status, 0);
  return status;
}

TEST(AbortStatus, AWorkerThatAbortsExitsSayingSoEvenBehindHandlersThatReturn) {
  for (const char* mode : {"abort", "abort-behind-llvm"}) {
    SCOPED_TRACE(mode);
    const int status = wait_status_in_own_namespaces(mode);
    if (status == -1) GTEST_SKIP() << "no namespaces here";
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == server::worker::kAbortedExitStatus)
        << "status " << status << (WIFSIGNALED(status) ? " (a signal)" : "");
  }
}

TEST(AbortStatus, AWorkersRealFaultStillEndsItWithSegv) {
  const int status = wait_status_in_own_namespaces("fault");
  if (status == -1) GTEST_SKIP() << "no namespaces here";
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV) << "status " << status;
}

// Outside a PID namespace of its own, abort() ends it with SIGABRT itself.
TEST(AbortStatus, AProcessThatIsNotFirstInItsNamespaceAbortsAsUsual) {
  const pid_t child = fork();
  if (child == 0) {
    execl(KAD_ABORTING_PROCESS_PATH, KAD_ABORTING_PROCESS_PATH, "abort", nullptr);
    _exit(127);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT) << "status " << status;
}

// kad tells how such a worker ended: aborted, not a segmentation fault.
TEST(AbortStatus, KadSaysAWorkerThatAbortedAborted) {
  absl::StatusOr<std::unique_ptr<server::worker::WorkerProcess>> w =
      server::worker::WorkerProcess::spawn({.executable = KAD_ABORTING_PROCESS_PATH, .args = {}},
                                           "opencl:pocl:0");
  ASSERT_TRUE(w.ok()) << w.status();
  if ((*w)->pid() <= 0) GTEST_SKIP();
  const absl::Status hello = (*w)->await_hello(absl::Now() + absl::Seconds(30));
  EXPECT_EQ(hello.code(), absl::StatusCode::kUnavailable);
  if (wait_status_in_own_namespaces("abort") != -1) {
    EXPECT_THAT(std::string(hello.message()), ::testing::HasSubstr("aborted (SIGABRT")) << hello;
  } else {
    EXPECT_THAT(std::string(hello.message()), ::testing::HasSubstr("signal 6")) << hello;
  }
}

}  // namespace
}  // namespace kad
