#include "tests/support/daemon.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"

namespace kad::testing {

pid_t spawn(const std::vector<std::string>& argv, const std::string& log_path) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // posix_spawn, not fork: it does not copy the caller's page tables, which
  // for a benchmark process with a daemon and a driver inside costs
  // milliseconds that time_to_load would count as the client's.
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (!log_path.empty()) {
    posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
  }
  pid_t pid = -1;
  if (posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ) != 0) {
    // As a fork and a failed exec would: a child that exits 127, so that a
    // caller always has a process of its own to wait for or to signal.
    pid = fork();
    if (pid == 0) _exit(127);
  }
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

int wait_exit(pid_t pid) {
  int status = 0;
  if (pid <= 0 || waitpid(pid, &status, 0) != pid) return -1000;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return -WTERMSIG(status);
}

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::start(std::vector<std::string> extra_args) {
  std::unique_ptr<Daemon> d(new Daemon());
  char dir[] = "/tmp/kad-test-XXXXXX";
  if (mkdtemp(dir) == nullptr) return absl::InternalError("mkdtemp failed");
  d->dir_ = dir;
  if (absl::Status s = d->launch("tcp://127.0.0.1:0", std::move(extra_args)); !s.ok()) return s;
  return d;
}

absl::Status Daemon::restart(std::vector<std::string> extra_args) {
  stop(SIGKILL);
  return launch(tcp_uri_, std::move(extra_args));
}

absl::Status Daemon::launch(const std::string& tcp_listen, std::vector<std::string> extra_args) {
  const std::string ready = dir_ + "/ready";
  std::filesystem::remove(ready);
  // Under util-linux's setpriv --pdeathsig where there is one: a test
  // process that dies without running its destructors (an abort, ctest's
  // SIGKILL at its timeout) takes its kads with it, instead of leaving them
  // serving, and taking CPU time, for the rest of the suite. The signal
  // comes when the thread that started kad ends: tests start their kads on
  // their main thread.
  constexpr char kSetpriv[] = "/usr/bin/setpriv";
  std::vector<std::string> argv = {
      KAD_DAEMON_PATH, "--listen", "unix:" + dir_ + "/kad.sock", "--listen", tcp_listen,
      "--ready-file",  ready};
  if (access(kSetpriv, X_OK) == 0) argv.insert(argv.begin(), {kSetpriv, "--pdeathsig", "KILL"});
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  pid_ = spawn(argv, dir_ + "/kad.log");
  if (pid_ < 0) return absl::InternalError("fork failed");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!std::filesystem::exists(ready)) {
    int status;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return absl::InternalError("kad exited before serving:\n" + log());
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return absl::DeadlineExceededError("kad did not start within 30 s:\n" + log());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::ifstream in(ready);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("unix:", 0) == 0) unix_uri_ = line;
    if (line.rfind("tcp://", 0) == 0) tcp_uri_ = line;
    if (line.rfind("http://", 0) == 0) metrics_url_ = line;
  }
  return absl::OkStatus();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Daemon::log() const { return read_file(dir_ + "/kad.log"); }

int Daemon::stop(int signal) {
  if (pid_ < 0) return -1000;
  kill(pid_, signal);
  const int code = wait_exit(pid_);
  pid_ = -1;
  return code;
}

Daemon::~Daemon() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    wait_exit(pid_);
  }
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

}  // namespace kad::testing
