// The side socket for shared-memory channels (`<socket path>.shm`,
// SOCK_SEQPACKET): a local client sends a Hello naming its session and
// queue and receives the channel's memfd (SCM_RIGHTS). Only a session's own
// client knows its id, and a queue is checked against that session.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/engine.h"
#include "server/shm_channel.h"

namespace kad::server {

class ShmListener {
 public:
  static absl::StatusOr<std::unique_ptr<ShmListener>> start(Engine& engine, std::string path,
                                                            ShmOptions options);
  ~ShmListener();

  const std::string& path() const { return path_; }
  size_t channels() const;

 private:
  ShmListener(Engine& engine, std::string path, ShmOptions options)
      : engine_(engine), path_(std::move(path)), options_(options) {}
  void accept_loop();
  // Answers one connection's Hello; on success the connection belongs to a channel.
  void serve_hello(int fd);

  Engine& engine_;
  std::string path_;
  ShmOptions options_;
  int listen_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<ShmChannel>> channels_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kad::server
