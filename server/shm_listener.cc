#include "server/shm_listener.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "kad/shm/v1/handshake.h"
#include "spdlog/spdlog.h"

namespace kad::server {
namespace {

using namespace shm::v1;

// Answers a hello with `status`, and `fd` (of `bytes`) attached when not -1.
bool send_status_reply(int socket, const absl::Status& status, int fd, uint64_t bytes) {
  Reply reply{};
  reply.code = static_cast<int32_t>(status.code());
  reply.bytes = bytes;
  const size_t n = std::min(status.message().size(), sizeof(reply.message));
  std::memcpy(reply.message, status.message().data(), n);
  reply.message_length = static_cast<uint32_t>(n);
  return shm::v1::send_reply(socket, reply, fd);
}

// Refuses a connection before its hello is served: reads what the client
// sent already (a socket closed with a message unread resets the client's
// end, and it would never read why), answers `status` and closes. A few
// messages at most: a client that keeps sending holds the accept thread no
// longer (its one hello is all a client sends before an answer).
void refuse_connection(int socket, const absl::Status& status) {
  union {
    Hello hello;
    MapBuffer map;
  } unread;
  for (int i = 0; i < 4 && recv(socket, &unread, sizeof(unread), MSG_DONTWAIT) > 0; ++i) {
  }
  send_status_reply(socket, status, -1, 0);
  close(socket);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShmListener>> ShmListener::start(Engine& engine, std::string path,
                                                                ShmOptions options) {
  std::unique_ptr<ShmListener> l(new ShmListener(engine, std::move(path), options));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (l->path_.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrFormat("socket path %s is too long", l->path_));
  }
  std::strncpy(addr.sun_path, l->path_.c_str(), sizeof(addr.sun_path) - 1);
  unlink(l->path_.c_str());
  l->listen_fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (l->listen_fd_ < 0 ||
      bind(l->listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(l->listen_fd_, 64) != 0) {
    return absl::UnavailableError(
        absl::StrFormat("cannot listen on %s: %s", l->path_, std::strerror(errno)));
  }
  l->wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (l->wake_fd_ < 0) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("cannot make an eventfd for %s: %s", l->path_, std::strerror(errno)));
  }
  l->thread_ = std::thread([p = l.get()] { p->accept_loop(); });
  return l;
}

ShmListener::~ShmListener() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  join_hellos(/*all=*/true);  // each is bounded: its read, kSessionWait, its reply
  for (const WaitingHello& w : waiting_) close(w.fd);
  if (wake_fd_ >= 0) close(wake_fd_);
  if (listen_fd_ >= 0) close(listen_fd_);
  unlink(path_.c_str());
  absl::MutexLock lock(&mu_);
  channels_.clear();
}

size_t ShmListener::channels() const {
  absl::MutexLock lock(&mu_);
  size_t n = 0;
  for (const auto& c : channels_) n += !c->finished();
  return n;
}

void ShmListener::join_hellos(bool all) {
  for (auto it = hellos_.begin(); it != hellos_.end();) {
    if (all || it->done.load()) {
      if (it->thread.joinable()) it->thread.join();
      it = hellos_.erase(it);
    } else {
      ++it;
    }
  }
}

void ShmListener::accept_loop() {
  while (!stop_.load()) {
    // Waiting connections have a deadline: look at least every 100 ms.
    pollfd p[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (poll(p, 2, waiting_.empty() ? 200 : 100) > 0) {
      if (p[1].revents & POLLIN) {
        eventfd_t ended;
        eventfd_read(wake_fd_, &ended);
      }
      const int fd =
          p[0].revents & POLLIN ? accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC) : -1;
      if (fd < 0 && (errno == EMFILE || errno == ENFILE || errno == ENOMEM || errno == ENOBUFS)) {
        // Out of descriptors or memory: the connection stays queued and poll
        // says so at once; look again a little later, not in a busy loop.
        absl::SleepFor(absl::Milliseconds(100));
      }
      if (fd >= 0) {
        ucred peer{};
        socklen_t len = sizeof(peer);
        const uid_t uid =
            getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) == 0 ? peer.uid : ~uid_t{0};
        const size_t of_uid = static_cast<size_t>(
            std::count_if(waiting_.begin(), waiting_.end(),
                          [uid](const WaitingHello& w) { return w.uid == uid; }));
        if (waiting_.size() >= kMaxWaitingHellos || of_uid >= kMaxWaitingHellosPerUid) {
          refuse_connection(
              fd, absl::UnavailableError(
                      of_uid >= kMaxWaitingHellosPerUid
                          ? absl::StrFormat("kad has %d other shared-memory connections of uid %d "
                                            "waiting for their handshake; try again",
                                            of_uid, uid)
                          : absl::StrFormat("kad has %d other shared-memory connections waiting "
                                            "for their handshake; try again",
                                            waiting_.size())));
        } else {
          waiting_.push_back({fd, uid, absl::Now()});
        }
      }
    }
    join_hellos(/*all=*/false);
    start_waiting_hellos();
    absl::MutexLock lock(&mu_);  // reap channels whose client left
    std::erase_if(channels_, [](const auto& c) { return c->finished(); });
  }
}

void ShmListener::start_waiting_hellos() {
  const absl::Time now = absl::Now();
  for (auto w = waiting_.begin(); w != waiting_.end();) {
    const size_t of_uid = static_cast<size_t>(std::count_if(
        hellos_.begin(), hellos_.end(), [&](const PendingHello& h) { return h.uid == w->uid; }));
    if (hellos_.size() < kMaxPendingHellos && of_uid < kMaxPendingHellosPerUid) {
      PendingHello& hello = hellos_.emplace_back();
      hello.uid = w->uid;
      try {
        hello.thread = std::thread([this, fd = w->fd, &hello] {
          serve_hello(fd);
          hello.done.store(true);
          eventfd_write(wake_fd_, 1);
        });
      } catch (const std::system_error&) {
        hellos_.pop_back();
        refuse_connection(w->fd, absl::ResourceExhaustedError("kad cannot start a thread"));
      }
      w = waiting_.erase(w);
    } else if (now - w->since > kHelloTurnWait) {
      refuse_connection(
          w->fd, absl::UnavailableError(absl::StrFormat(
                     "kad answered %d other shared-memory handshakes of uid %d for %d s, and "
                     "this connection's turn did not come; try again",
                     of_uid, w->uid, absl::ToInt64Seconds(kHelloTurnWait))));
      w = waiting_.erase(w);
    } else {
      ++w;
    }
  }
}

void ShmListener::serve_hello(int fd) {
  timeval timeout{1, 0};  // a client that connects and says nothing is dropped
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  union {
    uint32_t request;
    Hello hello;
    MapBuffer map;
  } message{};
  const ssize_t n = recv(fd, &message, sizeof(message), 0);
  auto refuse = [&](const absl::Status& s) {
    send_status_reply(fd, s, -1, 0);
    close(fd);
  };
  ucred peer{};
  socklen_t len = sizeof(peer);
  const bool peer_known = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) == 0;
  // The session named, if this connection's process may use it: the uid
  // that opened it, or root (an unknown peer may not, where the opener is
  // known).
  auto session_of = [&](const char(&id)[64]) -> absl::StatusOr<std::shared_ptr<Session>> {
    absl::StatusOr<std::shared_ptr<Session>> s =
        engine_.session(std::string(id, strnlen(id, sizeof(id))));
    if (!s.ok() || !(*s)->opener_uid.has_value()) return s;
    if (!peer_known || (peer.uid != 0 && peer.uid != *(*s)->opener_uid)) {
      return absl::PermissionDeniedError(
          absl::StrFormat("this session was not opened by this connection's user (uid %d)",
                          peer_known ? static_cast<int64_t>(peer.uid) : int64_t{-1}));
    }
    return s;
  };
  if (n == static_cast<ssize_t>(sizeof(MapBuffer)) &&
      message.request == static_cast<uint32_t>(Request::kMapBuffer)) {
    absl::StatusOr<std::shared_ptr<Session>> session = session_of(message.map.session_id);
    if (!session.ok()) return refuse(session.status());
    absl::StatusOr<Engine::MappedBuffer> mapped =
        engine_.map_buffer(**session, message.map.buffer, kSessionWait);
    if (!mapped.ok()) return refuse(mapped.status());
    send_status_reply(fd, absl::OkStatus(), mapped->fd, mapped->bytes);
    ::close(mapped->fd);
    close(fd);
    return;
  }
  if (n != static_cast<ssize_t>(sizeof(Hello)) ||
      message.request != static_cast<uint32_t>(Request::kHello)) {
    return refuse(absl::InvalidArgumentError(
        absl::StrFormat("expected a Hello of %d bytes or a MapBuffer of %d bytes, got %d bytes",
                        sizeof(Hello), sizeof(MapBuffer), n)));
  }
  const Hello& hello = message.hello;
  if (hello.version != kVersion) {
    return refuse(absl::FailedPreconditionError(
        absl::StrFormat("shared-memory protocol version %d is not supported; kad speaks %d",
                        hello.version, kVersion)));
  }
  absl::StatusOr<std::shared_ptr<Session>> session = session_of(hello.session_id);
  if (!session.ok()) return refuse(session.status());
  if (absl::Status q = engine_.check_queue(**session, hello.queue, kSessionWait); !q.ok())
    return refuse(q);

  absl::StatusOr<std::unique_ptr<ShmChannel>> channel =
      ShmChannel::create(engine_, *session, hello.queue, fd, options_);
  if (!channel.ok()) return refuse(channel.status());
  // Started before the client hears of it: a channel kad cannot serve is
  // refused, not handed over dead.
  if (absl::Status started = (*channel)->start(); !started.ok()) {
    spdlog::warn("{}: {}", (*session)->log_name(), std::string(started.message()));
    send_status_reply(fd, started, -1, 0);
    return;  // the channel closes fd
  }
  if (!send_status_reply(fd, absl::OkStatus(), (*channel)->memfd(), kChannelBytes))
    return;  // closes fd
  spdlog::debug("{}: queue {} on shared memory (pid {}, uid {})", (*session)->log_name(),
                hello.queue, peer.pid, peer.uid);
  absl::MutexLock lock(&mu_);
  channels_.push_back(*std::move(channel));
}

}  // namespace kad::server
