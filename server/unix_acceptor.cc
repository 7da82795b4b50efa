#include "server/unix_acceptor.h"

#include <fcntl.h>
#include <grpcpp/server_posix.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "spdlog/spdlog.h"

namespace kad::server {

void PeerCredentials::note(int fd, uint32_t uid) {
  absl::MutexLock lock(&mu_);
  // A number gRPC closed and the kernel gave again: the newest holder's.
  by_fd_[fd] = uid;
}

std::optional<uint32_t> PeerCredentials::uid_of(const std::string& peer) const {
  absl::string_view rest = peer;
  if (!absl::ConsumePrefix(&rest, "fd:")) return std::nullopt;
  int fd = -1;
  if (!absl::SimpleAtoi(rest, &fd)) return std::nullopt;
  absl::MutexLock lock(&mu_);
  auto it = by_fd_.find(fd);
  if (it == by_fd_.end()) return std::nullopt;
  return it->second;
}

absl::StatusOr<std::unique_ptr<UnixAcceptor>> UnixAcceptor::start(grpc::Server& server,
                                                                  const std::string& path,
                                                                  PeerCredentials& credentials) {
  sockaddr_un address{};
  if (path.size() >= sizeof(address.sun_path)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("socket path %s is %d bytes long; at most %d fit", path, path.size(),
                        sizeof(address.sun_path) - 1));
  }
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.data(), path.size());
  const int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0) return absl::UnavailableError(absl::StrCat("socket: ", std::strerror(errno)));
  if (bind(listener, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0 ||
      listen(listener, SOMAXCONN) != 0) {
    const int e = errno;
    close(listener);
    return absl::UnavailableError(absl::StrCat("cannot listen on ", path, ": ", std::strerror(e)));
  }
  const int wake = eventfd(0, EFD_CLOEXEC);
  if (wake < 0) {
    close(listener);
    return absl::UnavailableError(absl::StrCat("eventfd: ", std::strerror(errno)));
  }
  std::unique_ptr<UnixAcceptor> a(new UnixAcceptor(server, credentials, listener, wake));
  a->thread_ = std::thread([p = a.get()] { p->run(); });
  return a;
}

UnixAcceptor::~UnixAcceptor() {
  const uint64_t one = 1;
  if (write(wake_, &one, sizeof(one)) < 0) spdlog::warn("cannot stop accepting: {}", errno);
  if (thread_.joinable()) thread_.join();
  close(listener_);
  close(wake_);
}

void UnixAcceptor::run() {
  pthread_setname_np(pthread_self(), "kad-accept");
  for (;;) {
    pollfd fds[2] = {{listener_, POLLIN, 0}, {wake_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      spdlog::error("accepting on the UNIX socket stopped: {}", std::strerror(errno));
      return;
    }
    if (fds[1].revents != 0) return;
    // gRPC's endpoints expect a non-blocking descriptor.
    const int fd = accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      // Out of descriptors or memory: the client sees its connection fail;
      // kad goes on with the others, without spinning.
      if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) {
        spdlog::warn("cannot accept a connection on the UNIX socket: {}", std::strerror(errno));
        poll(nullptr, 0, 10);
      }
      continue;
    }
    ucred peer{};
    socklen_t size = sizeof(peer);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &size) != 0) {
      spdlog::warn("a UNIX socket peer without credentials: {}", std::strerror(errno));
      close(fd);
      continue;
    }
    credentials_.note(fd, peer.uid);
    grpc::AddInsecureChannelFromFd(&server_, fd);  // gRPC owns it from now on
  }
}

}  // namespace kad::server
