// One way for tests to run a real kad daemon: a child process listening on a
// fresh UNIX socket and a free loopback TCP port, stopped when the handle goes.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kad::testing {

class Daemon {
 public:
  // Starts `kad` (KAD_DAEMON_PATH) with `extra_args` and waits until it serves.
  static absl::StatusOr<std::unique_ptr<Daemon>> start(std::vector<std::string> extra_args = {});
  ~Daemon();  // SIGKILL if still running

  const std::string& unix_uri() const { return unix_uri_; }
  const std::string& tcp_uri() const { return tcp_uri_; }
  // http://HOST:PORT/metrics when started with --metrics.
  const std::string& metrics_url() const { return metrics_url_; }
  pid_t pid() const { return pid_; }
  std::string log() const;  // what the daemon printed

  // Sends `signal` and waits for the exit; returns the exit code (-1 if killed by a signal).
  int stop(int signal);
  // Kills kad (SIGKILL, as a crash would) and starts a new one on the same
  // UNIX socket and TCP port, with `extra_args`; its log starts over.
  absl::Status restart(std::vector<std::string> extra_args = {});

 private:
  Daemon() = default;
  absl::Status launch(const std::string& tcp_listen, std::vector<std::string> extra_args);
  pid_t pid_ = -1;
  std::string dir_, unix_uri_, tcp_uri_, metrics_url_;
};

// The whole text of the file at `path` ("" when it cannot be read).
std::string read_file(const std::string& path);

// Runs `argv` as a child process; returns its pid (or -1).
pid_t spawn(const std::vector<std::string>& argv, const std::string& log_path = "");
// Waits for `pid`; returns its exit code, or -signal if a signal ended it.
int wait_exit(pid_t pid);

}  // namespace kad::testing
