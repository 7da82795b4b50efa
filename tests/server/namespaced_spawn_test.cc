// DESIGN §8: a worker starts in a user and PID namespace of its own, where
// it is PID 1 and no process outside can be seen or signalled, and whose
// processes all end with it. Checked with a shell in the worker's place,
// which does what a taken-over worker would: look for the process that
// started it, and start a process of its own in a new session (out of its
// process group, which kad's stop also kills).
#include "server/worker/namespaced_spawn.h"

#include <grp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

extern char** environ;

namespace kad {
namespace {

using server::worker::spawn_in_own_namespaces;

// A uid from the range kad's workers take under root (worker_uids.h).
constexpr uid_t kWorkerUid = 0x7A00FFF0;
// Another, for the process limit alone: the limit counts every process of
// its uid on the machine, and ctest runs the other tests here beside it
// (a CI run counted two of kWorkerUid's there).
constexpr uid_t kForkBombUid = 0x7A00FFE0;

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

// Starts `/bin/sh -c script` as kad starts a worker
// (spawn_in_own_namespaces with `limits`), its fd 3 a socket whose other
// end goes to `*lines` (-1 when it did not start), for what it reports.
absl::StatusOr<pid_t> start_shell(const std::string& script,
                                  const server::worker::NamespaceLimits& limits, int* lines) {
  *lines = -1;
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
    return absl::InternalError("no socketpair");
  std::vector<std::string> args{"/bin/sh", "-c", script};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  absl::StatusOr<pid_t> shell =
      spawn_in_own_namespaces("/bin/sh", argv.data(), environ, fds[1], limits);
  close(fds[1]);
  if (shell.ok()) {
    *lines = fds[0];
  } else {
    close(fds[0]);
  }
  return shell;
}

TEST(NamespacedSpawn, AWorkerSeesNoProcessOutsideItsNamespaceAndTakesWhatItStartedWithIt) {
  const std::string script = absl::StrCat(
      "echo \"$$\" >&3; "
      "if kill -0 ",
      getpid(), " 2>/dev/null; then echo seen >&3; else echo unseen >&3; fi; ",
      "setsid sleep 600 & echo started >&3; wait");
  int lines = -1;
  absl::StatusOr<pid_t> shell = start_shell(script, {}, &lines);
  if (absl::IsUnavailable(shell.status())) GTEST_SKIP() << shell.status();
  ASSERT_TRUE(shell.ok()) << shell.status();
  EXPECT_EQ(read_line(lines), "1") << "the worker is not PID 1 of a namespace of its own";
  EXPECT_EQ(read_line(lines), "unseen") << "the worker sees the process that started it";
  ASSERT_EQ(read_line(lines), "started");
  close(lines);

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

// How many of 20 background sleeps a shell in a worker's place starts, run
// by `uid` with spawn_in_own_namespaces(max_processes, run_as), and a
// folder of its own as a worker has (its ids then mapped in its namespace):
// the shell (dash) gives up at the first fork that fails. -1: namespaces
// cannot be made here.
int sleeps_started(uid_t uid, uint32_t max_processes, uid_t run_as = 0) {
  int result[2];
  if (pipe(result) != 0) return -2;
  char folder[] = "/tmp/kad-folder-XXXXXX";
  if (mkdtemp(folder) == nullptr || chmod(folder, 0777) != 0) return -2;
  const pid_t tester = fork();
  if (tester == 0) {
    close(result[0]);
    // Only system calls from here on: the test process may have threads.
    int started = -2;
    if (uid == 0 || (setgroups(0, nullptr) == 0 && setresgid(uid, uid, uid) == 0 &&
                     setresuid(uid, uid, uid) == 0)) {
      int fds[2];
      socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds);
      char sh[] = "/bin/sh", c[] = "-c";
      char script[] =
          "i=0; while [ $i -lt 20 ]; do sleep 30 & i=$((i+1)); echo $i >&3; done; "
          "echo done >&3; wait";
      char* argv[] = {sh, c, script, nullptr};
      absl::StatusOr<pid_t> shell = spawn_in_own_namespaces(sh, argv, environ, fds[1],
                                                            {.max_processes = max_processes,
                                                             .folder = folder,
                                                             .folder_bytes = 1 << 20,
                                                             .folder_files = 64,
                                                             .run_as = run_as});
      close(fds[1]);
      started = -1;
      if (shell.ok()) {
        started = 0;
        for (std::string line = read_line(fds[0]); !line.empty() && line != "done";
             line = read_line(fds[0])) {
          absl::SimpleAtoi(line, &started);
        }
        kill(*shell, SIGKILL);  // its namespace ends, and its sleeps with it
        waitpid(*shell, nullptr, 0);
      }
    }
    (void)!write(result[1], &started, sizeof started);
    _exit(0);
  }
  close(result[1]);
  int started = -2;
  if (read(result[0], &started, sizeof started) != sizeof started) started = -2;
  close(result[0]);
  waitpid(tester, nullptr, 0);
  std::filesystem::remove_all(folder);
  return started;
}

TEST(NamespacedSpawn, AWorkersProcessLimitStopsAForkBombInItsNamespace) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to run the worker as another user";
  constexpr uid_t kNobody = 65534;
  const int unbounded = sleeps_started(kNobody, 0);
  if (unbounded == -1) GTEST_SKIP() << "this kernel makes no namespaces for an unprivileged user";
  ASSERT_EQ(unbounded, 20) << "without a limit, every sleep starts";
  // 8 processes: the shell and 7 sleeps; the 8th fork fails with EAGAIN.
  // Other processes of the same user outside the namespace do not count.
  EXPECT_EQ(sleeps_started(kNobody, 8), 7);
  // Linux holds root to no such limit: why a root kad's workers run as uids
  // of their own, which it does hold to it.
  EXPECT_EQ(sleeps_started(0, 8), 20);
  EXPECT_EQ(sleeps_started(0, 8, kForkBombUid), 7);
}

// Under root, a worker with a uid of its own is that uid (and group) alone
// to the whole machine, with no capability: it cannot read what root keeps
// to itself, and owns its folder, a tmpfs as any worker's.
TEST(NamespacedSpawn, AWorkerRunAsAUidOfItsOwnIsThatUidAloneAndOwnsItsFolder) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to start a worker as another uid";
  char folder[] = "/tmp/kad-folder-XXXXXX";
  ASSERT_NE(mkdtemp(folder), nullptr);
  // kad gives it its folder before it starts (WorkerProcess::spawn).
  ASSERT_EQ(chown(folder, kWorkerUid, kWorkerUid), 0);
  const std::string script = absl::StrCat(
      "id -u >&3; id -G >&3; grep CapEff /proc/self/status | tr -d ' \\t' >&3; "
      "if cat /etc/shadow >/dev/null 2>&1; then echo read >&3; else echo refused >&3; fi; "
      "if touch ",
      folder, "/mine; then stat -c %u ", folder, "/mine >&3; else echo unwritable >&3; fi; ",
      "grep -c ' ", folder, " tmpfs ' /proc/self/mounts >&3");
  int lines = -1;
  absl::StatusOr<pid_t> shell = start_shell(
      script, {.folder = folder, .folder_bytes = 1 << 20, .folder_files = 64, .run_as = kWorkerUid},
      &lines);
  if (absl::IsUnavailable(shell.status())) {
    std::filesystem::remove_all(folder);
    GTEST_SKIP() << shell.status();
  }
  ASSERT_TRUE(shell.ok()) << shell.status();
  EXPECT_EQ(read_line(lines), absl::StrCat(kWorkerUid));
  EXPECT_EQ(read_line(lines), absl::StrCat(kWorkerUid)) << "groups besides its own";
  EXPECT_EQ(read_line(lines), "CapEff:0000000000000000");
  EXPECT_EQ(read_line(lines), "refused") << "the worker read /etc/shadow";
  EXPECT_EQ(read_line(lines), absl::StrCat(kWorkerUid)) << "its folder is not its own";
  EXPECT_EQ(read_line(lines), "1") << "the folder is not a tmpfs of its own";
  close(lines);
  int status = 0;
  ASSERT_EQ(waitpid(*shell, &status, 0), *shell);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  std::filesystem::remove_all(folder);
}

// A kad that is not root cannot give its workers other uids: it says so,
// naming both, rather than start a worker as its own uid unsaid.
TEST(NamespacedSpawn, OnlyRootStartsAWorkerAsAnotherUid) {
  int result[2];
  ASSERT_EQ(pipe(result), 0);
  const pid_t tester = fork();
  if (tester == 0) {
    close(result[0]);
    std::string said = "cannot become nobody";
    if (geteuid() != 0 || (setgroups(0, nullptr) == 0 && setresgid(65534, 65534, 65534) == 0 &&
                           setresuid(65534, 65534, 65534) == 0)) {
      char sh[] = "/bin/sh", c[] = "-c", script[] = "exit 0";
      char* argv[] = {sh, c, script, nullptr};
      absl::StatusOr<pid_t> shell =
          spawn_in_own_namespaces(sh, argv, environ, 0, {.run_as = kWorkerUid});
      said = shell.ok() ? "started" : shell.status().ToString();
    }
    (void)!write(result[1], said.data(), said.size());
    _exit(0);
  }
  close(result[1]);
  std::string said;
  char buffer[512];
  for (ssize_t n; (n = read(result[0], buffer, sizeof buffer)) > 0;) said.append(buffer, n);
  close(result[0]);
  waitpid(tester, nullptr, 0);
  EXPECT_THAT(said, ::testing::StartsWith("FAILED_PRECONDITION"));
  EXPECT_THAT(said, ::testing::HasSubstr(absl::StrCat("as uid ", kWorkerUid)));
}

// A worker's folder is a tmpfs of its own, in its own mount namespace: what
// its code writes there stops at the bound, in bytes and in files, and none
// of it reaches the folder kad made (nor the disk under it). Its uid is
// kad's, mapped to itself, so that it can make files there at all.
TEST(NamespacedSpawn, AWorkersFolderHoldsNoMoreThanItsBoundAndNothingReachesKads) {
  char folder[] = "/tmp/kad-folder-XXXXXX";
  ASSERT_NE(mkdtemp(folder), nullptr);
  const std::string script = absl::StrCat(
      "cd ", folder,
      " || exit 1; dd if=/dev/zero of=big bs=64k count=100 2>/dev/null; "
      "stat -c %s big >&3; rm big; "
      "i=0; while [ $i -lt 200 ] && touch f$i 2>/dev/null; do i=$((i+1)); done; echo $i >&3; "
      "id -u >&3; "
      "grep -c ' ",
      folder, " tmpfs ' /proc/self/mounts >&3");
  int lines = -1;
  absl::StatusOr<pid_t> shell =
      start_shell(script, {.folder = folder, .folder_bytes = 1 << 20, .folder_files = 64}, &lines);
  if (absl::IsUnavailable(shell.status())) {
    std::filesystem::remove_all(folder);
    GTEST_SKIP() << shell.status();
  }
  ASSERT_TRUE(shell.ok()) << shell.status();
  EXPECT_EQ(read_line(lines), "1048576") << "a file larger than the folder's bound";
  int files = -1;
  EXPECT_TRUE(absl::SimpleAtoi(read_line(lines), &files));
  EXPECT_GT(files, 32);
  EXPECT_LT(files, 64) << "more files than the folder's bound";
  EXPECT_EQ(read_line(lines), absl::StrCat(geteuid()));
  EXPECT_EQ(read_line(lines), "1") << "the folder is not a tmpfs of its own";
  close(lines);
  int status = 0;
  ASSERT_EQ(waitpid(*shell, &status, 0), *shell);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_TRUE(std::filesystem::is_empty(folder)) << "the worker wrote into kad's own folder";
  std::filesystem::remove_all(folder);
}

// A worker's memory of its own (heap, stacks: RLIMIT_DATA) is bounded, root
// or not: an allocation past the bound fails in the worker, one within it
// does not.
TEST(NamespacedSpawn, AWorkersMemoryLimitRefusesAnAllocationPastIt) {
  // dd allocates its block: 256 MiB past the bound of 128, 16 MiB within.
  int lines = -1;
  absl::StatusOr<pid_t> shell = start_shell(
      "dd if=/dev/zero of=/dev/null bs=256M count=1 2>/dev/null; echo $? >&3; "
      "dd if=/dev/zero of=/dev/null bs=16M count=1 2>/dev/null; echo $? >&3",
      {.max_data_bytes = uint64_t{128} << 20}, &lines);
  if (absl::IsUnavailable(shell.status())) GTEST_SKIP() << shell.status();
  ASSERT_TRUE(shell.ok()) << shell.status();
  EXPECT_EQ(read_line(lines), "1") << "256 MiB allocated under a bound of 128";
  EXPECT_EQ(read_line(lines), "0") << "16 MiB refused under a bound of 128";
  close(lines);
  ASSERT_EQ(waitpid(*shell, nullptr, 0), *shell);
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
