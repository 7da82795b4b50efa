// The kads that tests start (tests/support/daemon.h) end with the test
// process that started them, even one killed before its destructors run:
// none is left serving, and taking CPU time, for the rest of the suite.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/support/daemon.h"

namespace kad {
namespace {

// Whether `pid` still runs (a zombie waiting for its reaper does not).
bool running(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return false;
  const size_t name_end = stat.rfind(')');
  return name_end != std::string::npos && name_end + 2 < stat.size() && stat[name_end + 2] != 'Z';
}

// What the child that started a kad tells the test.
struct Started {
  pid_t kad = -1;
  char unix_uri[256] = {};
};

TEST(TestDaemons, AKadEndsWithTheTestProcessThatStartedItWhenThatIsKilled) {
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t test_process = fork();
  ASSERT_GE(test_process, 0);
  if (test_process == 0) {  // a test process that starts a kad, then is killed
    close(pipe_fds[0]);
    Started started;
    if (auto d = testing::Daemon::start({"--no-workers"}); d.ok()) {
      started.kad = (*d)->pid();
      std::strncpy(started.unix_uri, (*d)->unix_uri().c_str(), sizeof started.unix_uri - 1);
      (void)!write(pipe_fds[1], &started, sizeof started);
      pause();  // SIGKILL: the Daemon's destructor never runs
    }
    (void)!write(pipe_fds[1], &started, sizeof started);
    _exit(1);
  }
  close(pipe_fds[1]);
  Started started;
  const ssize_t got = read(pipe_fds[0], &started, sizeof started);
  close(pipe_fds[0]);
  kill(test_process, SIGKILL);
  waitpid(test_process, nullptr, 0);
  ASSERT_EQ(got, static_cast<ssize_t>(sizeof started));
  ASSERT_GT(started.kad, 0) << "the child could not start kad";
  bool ended = false;
  for (int i = 0; i < 500 && !ended; ++i) {
    ended = !running(started.kad);
    if (!ended) absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_TRUE(ended) << "kad " << started.kad << " outlived the test process that started it";
  if (!ended) kill(started.kad, SIGKILL);
  // Its folder (unix:/tmp/kad-test-XXXXXX/kad.sock), which the destructor
  // would have removed.
  const std::filesystem::path socket = std::string(started.unix_uri).substr(5);
  std::error_code ec;
  std::filesystem::remove_all(socket.parent_path(), ec);
}

}  // namespace
}  // namespace kad
