// DESIGN §8: a worker starts in a user and PID namespace of its own, where
// it is PID 1 and no process outside can be seen or signalled, and whose
// processes all end with it. Checked with a shell in the worker's place,
// which does what a taken-over worker would: look for the process that
// started it, and start a process of its own in a new session (out of its
// process group, which kad's stop also kills).
#include "server/worker/namespaced_spawn.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

extern char** environ;

namespace kad {
namespace {

using server::worker::spawn_in_own_namespaces;

// One line from `fd`, without its newline.
std::string read_line(int fd) {
  std::string line;
  char c = 0;
  while (read(fd, &c, 1) == 1 && c != '\n') line.push_back(c);
  return line;
}

// The fields of /proc/<pid>/stat after the command's name: state, parent,
// process group, session...; empty once the process is gone.
std::vector<std::string> process_stat(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat;
  std::getline(in, stat);
  const size_t end = stat.rfind(')');
  if (end == std::string::npos || end + 2 >= stat.size()) return {};
  return absl::StrSplit(stat.substr(end + 2), ' ');
}

// "R", "S", "Z"...: the state of process `pid`; empty once it is gone.
std::string process_state(pid_t pid) {
  std::vector<std::string> stat = process_stat(pid);
  return stat.empty() ? "" : stat[0];
}

// Whether `pid` leads a session of its own (setsid has run in it).
bool leads_its_session(pid_t pid) {
  std::vector<std::string> stat = process_stat(pid);
  return stat.size() > 3 && stat[3] == absl::StrCat(pid);
}

TEST(NamespacedSpawn, AWorkerSeesNoProcessOutsideItsNamespaceAndTakesWhatItStartedWithIt) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  const std::string script = absl::StrCat(
      "echo \"$$\" >&3; "
      "if kill -0 ",
      getpid(), " 2>/dev/null; then echo seen >&3; else echo unseen >&3; fi; ",
      "setsid sleep 600 & echo started >&3; wait");
  std::vector<std::string> args{"/bin/sh", "-c", script};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  absl::StatusOr<pid_t> shell = spawn_in_own_namespaces("/bin/sh", argv.data(), environ, fds[1]);
  close(fds[1]);
  if (absl::IsUnavailable(shell.status())) {
    close(fds[0]);
    GTEST_SKIP() << shell.status();
  }
  ASSERT_TRUE(shell.ok()) << shell.status();
  EXPECT_EQ(read_line(fds[0]), "1") << "the worker is not PID 1 of a namespace of its own";
  EXPECT_EQ(read_line(fds[0]), "unseen") << "the worker sees the process that started it";
  ASSERT_EQ(read_line(fds[0]), "started");
  close(fds[0]);

  // The process it started, by the pid kad sees.
  std::ifstream children(absl::StrCat("/proc/", *shell, "/task/", *shell, "/children"));
  std::string listed;
  std::getline(children, listed);
  std::vector<pid_t> started;
  for (absl::string_view p : absl::StrSplit(listed, ' ', absl::SkipEmpty())) {
    pid_t pid = 0;
    if (absl::SimpleAtoi(p, &pid)) started.push_back(pid);
  }
  ASSERT_EQ(started.size(), 1u) << "children: " << listed;
  // Until setsid has run in it, it is still in the worker's process group.
  const absl::Time give_up_waiting = absl::Now() + absl::Seconds(10);
  while (!leads_its_session(started[0]) && absl::Now() < give_up_waiting) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_TRUE(leads_its_session(started[0])) << "state " << process_state(started[0]);

  // kad stops a worker by its process group, which the sleep has left.
  kill(-*shell, SIGKILL);
  ASSERT_EQ(waitpid(*shell, nullptr, 0), *shell);
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  std::string state = process_state(started[0]);
  while (!state.empty() && state != "Z" && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(10));
    state = process_state(started[0]);
  }
  EXPECT_TRUE(state.empty() || state == "Z")
      << "a process the worker started in a session of its own outlived it (state " << state << ")";
  kill(started[0], SIGKILL);  // should the check above fail
}

TEST(NamespacedSpawn, AProgramThatCannotStartIsAnErrorNamingIt) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  char name[] = "/nonexistent/kad";
  char* argv[] = {name, nullptr};
  absl::StatusOr<pid_t> started = spawn_in_own_namespaces(name, argv, environ, fds[1]);
  close(fds[0]);
  close(fds[1]);
  if (absl::IsUnavailable(started.status())) GTEST_SKIP() << started.status();
  ASSERT_FALSE(started.ok());
  EXPECT_EQ(started.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(started.status().message(),
            "starting a worker (/nonexistent/kad) failed in execve: No such file or directory");
}

}  // namespace
}  // namespace kad
