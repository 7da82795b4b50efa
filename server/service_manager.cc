#include "server/service_manager.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_format.h"

namespace kad::server {

absl::StatusOr<ServiceManagerNotifier> ServiceManagerNotifier::from_environment() {
  const char* value = std::getenv("NOTIFY_SOCKET");
  if (value == nullptr) return ServiceManagerNotifier();
  std::string address = value;
  unsetenv("NOTIFY_SOCKET");
  if (address.empty()) return ServiceManagerNotifier();
  if (address[0] != '/' && address[0] != '@') {
    return absl::InvalidArgumentError(absl::StrFormat(
        "NOTIFY_SOCKET `%s` is neither a socket path nor an @abstract name", address));
  }
  if (address.size() >= sizeof(sockaddr_un::sun_path)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("NOTIFY_SOCKET `%s` is %d bytes, longer than a socket address holds (%d)",
                        address, address.size(), sizeof(sockaddr_un::sun_path) - 1));
  }
  return ServiceManagerNotifier(std::move(address));
}

absl::Status ServiceManagerNotifier::notify(std::string_view state) const {
  if (!enabled()) return absl::OkStatus();
  sockaddr_un to{};
  to.sun_family = AF_UNIX;
  std::memcpy(to.sun_path, address_.data(), address_.size());
  if (address_[0] == '@') to.sun_path[0] = '\0';  // the abstract namespace
  const socklen_t length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) +
                                                  address_.size() + (address_[0] == '/' ? 1 : 0));
  const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return absl::InternalError(
        absl::StrFormat("socket for NOTIFY_SOCKET: %s", std::strerror(errno)));
  }
  const ssize_t sent = sendto(fd, state.data(), state.size(), MSG_NOSIGNAL,
                              reinterpret_cast<const sockaddr*>(&to), length);
  const int error = errno;
  close(fd);
  if (sent != static_cast<ssize_t>(state.size())) {
    return absl::UnavailableError(absl::StrFormat("cannot tell the service manager at `%s`: %s",
                                                  address_, std::strerror(error)));
  }
  return absl::OkStatus();
}

}  // namespace kad::server
