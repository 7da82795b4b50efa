// The side socket for shared-memory channels (`<socket path>.shm`,
// SOCK_SEQPACKET): a local client sends a Hello naming its session and
// queue and receives the channel's memfd (SCM_RIGHTS). Only a session's own
// client knows its id, and a queue is checked against that session.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <deque>
#include <list>
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

  // Hellos are answered each on a thread of its own, this many at once at
  // most, so that a client that says nothing, or whose session is busy,
  // holds up no other's handshake.
  static constexpr size_t kMaxPendingHellos = 64;
  // Of those, from one uid: a user who opens connections and says nothing
  // (each held up to a second) takes up no more, and other users' clients
  // still get shared memory.
  static constexpr size_t kMaxPendingHellosPerUid = 4;
  // Connections past those wait their turn, in the order they came (32
  // clients of one user that start at once all get their channels): this
  // many of one uid, and in all, at most; one more is refused at once.
  static constexpr size_t kMaxWaitingHellosPerUid = 64;
  static constexpr size_t kMaxWaitingHellos = 256;
  // How long a connection may wait for its turn: refused past it (its
  // user's other connections said nothing, or their sessions were busy).
  static constexpr absl::Duration kHelloTurnWait = absl::Seconds(5);
  // How long a Hello may wait for its session (a copy of that session's may
  // hold it while its launches run): UNAVAILABLE past it.
  static constexpr absl::Duration kSessionWait = absl::Seconds(2);

 private:
  ShmListener(Engine& engine, std::string path, ShmOptions options)
      : engine_(engine), path_(std::move(path)), options_(options) {}
  void accept_loop();
  // Answers one connection's Hello; on success the connection belongs to a channel.
  void serve_hello(int fd);
  // Starts the hellos of waiting connections whose turn came, in order, and
  // refuses those that waited too long.
  void start_waiting_hellos();

  Engine& engine_;
  std::string path_;
  ShmOptions options_;
  int listen_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  struct PendingHello {
    std::thread thread;
    std::atomic<bool> done{false};
    uid_t uid = 0;  // of the connecting process
  };
  std::list<PendingHello> hellos_;  // the accept thread's
  struct WaitingHello {
    int fd = -1;
    uid_t uid = 0;
    absl::Time since;
  };
  std::deque<WaitingHello> waiting_;  // the accept thread's: connections not yet answered
  int wake_fd_ = -1;                  // an eventfd: a hello ended, a waiting one may start
  // Joins the hellos answered (all of them with `all`, waiting).
  void join_hellos(bool all);
  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<ShmChannel>> channels_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kad::server
