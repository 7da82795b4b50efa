#include "server/worker/worker_protocol.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"

namespace kad::server::worker {

absl::Status Connection::send(Op op, std::span<const std::byte> a, std::span<const std::byte> b,
                              int pass_fd) {
  Header header{static_cast<uint32_t>(op), 0, a.size() + b.size()};
  iovec iov[3] = {{&header, sizeof header},
                  {const_cast<std::byte*>(a.data()), a.size()},
                  {const_cast<std::byte*>(b.data()), b.size()}};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = 3;
  if (pass_fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
  }
  // A stream socket may take part of a message: send the rest, without the
  // descriptor (it went with the first byte).
  while (msg.msg_iovlen > 0) {
    const ssize_t n = sendmsg(fd_, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::UnavailableError(absl::StrFormat("worker connection: %s", std::strerror(errno)));
    }
    msg.msg_control = nullptr;
    msg.msg_controllen = 0;
    size_t left = static_cast<size_t>(n);
    while (msg.msg_iovlen > 0 && left >= msg.msg_iov[0].iov_len) {
      left -= msg.msg_iov[0].iov_len;
      ++msg.msg_iov;
      --msg.msg_iovlen;
    }
    if (msg.msg_iovlen > 0) {
      msg.msg_iov[0].iov_base = static_cast<char*>(msg.msg_iov[0].iov_base) + left;
      msg.msg_iov[0].iov_len -= left;
    }
  }
  return absl::OkStatus();
}

absl::Status Connection::wait_readable(absl::Time deadline) {
  for (;;) {
    int timeout_ms = -1;
    if (deadline != absl::InfiniteFuture()) {
      const absl::Duration left = deadline - absl::Now();
      timeout_ms = left <= absl::ZeroDuration() ? 0
                                                : static_cast<int>(absl::ToInt64Milliseconds(
                                                      absl::Ceil(left, absl::Milliseconds(1))));
    }
    pollfd p{fd_, POLLIN, 0};
    const int r = poll(&p, 1, timeout_ms);
    if (r > 0) return absl::OkStatus();  // data, or the peer's close (read then sees it)
    if (r == 0) return absl::DeadlineExceededError("no answer from the worker in time");
    if (errno != EINTR) {
      return absl::UnavailableError(absl::StrFormat("worker connection: %s", std::strerror(errno)));
    }
  }
}

absl::Status Connection::receive_header(Header* header, absl::Time deadline, int* fd) {
  if (fd != nullptr) *fd = -1;
  std::byte* out = reinterpret_cast<std::byte*>(header);
  size_t got = 0;
  // Read first, poll only when nothing is there: a reply that is already
  // waiting costs one system call.
  while (got < sizeof(Header)) {
    iovec iov{out + got, sizeof(Header) - got};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = recvmsg(fd_, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        if (absl::Status s = wait_readable(deadline); !s.ok()) return s;
        continue;
      }
      return absl::UnavailableError(absl::StrFormat("worker connection: %s", std::strerror(errno)));
    }
    if (n == 0) return absl::UnavailableError("the worker's connection closed");
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int passed;
        std::memcpy(&passed, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        if (fd != nullptr && *fd < 0) {
          *fd = passed;
        } else {
          close(passed);  // only one descriptor is ever expected
        }
      }
    }
    got += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status Connection::receive_payload(std::span<std::byte> out, absl::Time deadline) {
  size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = recv(fd_, out.data() + got, out.size() - got, MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        if (absl::Status s = wait_readable(deadline); !s.ok()) return s;
        continue;
      }
      return absl::UnavailableError(absl::StrFormat("worker connection: %s", std::strerror(errno)));
    }
    if (n == 0) return absl::UnavailableError("the worker's connection closed");
    got += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace kad::server::worker
