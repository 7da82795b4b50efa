#include "server/worker/worker_protocol.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"

namespace kad::server::worker {

absl::Status Connection::send(Op op, std::span<const std::byte> a, std::span<const std::byte> b,
                              int pass_fd, absl::Duration timeout) {
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
  const uint64_t total = sizeof header + a.size() + b.size();
  const absl::Duration allowed = timeout + absl::Seconds(static_cast<double>(total) / kSlowestRead);
  const absl::Time deadline = absl::Now() + allowed;
  uint64_t sent = 0;
  // A stream socket may take part of a message: send the rest, without the
  // descriptor (it went with the first byte).
  while (msg.msg_iovlen > 0) {
    const ssize_t n = sendmsg(fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        // The socket is full: wait for the peer to take some, within the
        // message's bound.
        const absl::Duration left = deadline - absl::Now();
        pollfd p{fd_, POLLOUT, 0};
        const int r = left <= absl::ZeroDuration()
                          ? 0
                          : poll(&p, 1,
                                 static_cast<int>(absl::ToInt64Milliseconds(
                                     absl::Ceil(left, absl::Milliseconds(1)))));
        if (r == 0) {
          return absl::DeadlineExceededError(absl::StrFormat(
              "the worker took %d of the %d bytes of a message in %s: it stopped reading", sent,
              total, absl::FormatDuration(allowed)));
        }
        if (r < 0 && errno != EINTR) {
          return absl::UnavailableError(
              absl::StrFormat("worker connection: %s", std::strerror(errno)));
        }
        continue;
      }
      return absl::UnavailableError(absl::StrFormat("worker connection: %s", std::strerror(errno)));
    }
    msg.msg_control = nullptr;
    msg.msg_controllen = 0;
    sent += static_cast<uint64_t>(n);
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

absl::Status Connection::receive_some(std::span<std::byte> out, size_t* got, int* fd,
                                      absl::Time deadline) {
  // Read first, poll only when nothing is there: a reply that is already
  // waiting costs one system call.
  for (;;) {
    iovec iov{out.data(), out.size()};
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
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int passed;
        std::memcpy(&passed, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        if (*fd < 0) {
          *fd = passed;
        } else {
          close(passed);  // one descriptor at a time is ever expected
        }
      }
    }
    if (n == 0) return absl::UnavailableError("the worker's connection closed");
    *got = static_cast<size_t>(n);
    return absl::OkStatus();
  }
}

MessageReader::~MessageReader() {
  if (pending_fd_ >= 0) close(pending_fd_);
}

absl::Status MessageReader::fill(size_t needed, absl::Time deadline) {
  while (end_ - begin_ < needed) {
    if (buffer_.size() - begin_ < needed || buffer_.size() == end_) {
      // Move what is unread to the front, and make room for the message.
      std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
      if (buffer_.size() < std::max<size_t>(needed, 64 << 10))
        buffer_.resize(std::max<size_t>(needed, 64 << 10));
    }
    size_t got = 0;
    std::span<std::byte> room(buffer_.data() + end_, buffer_.size() - end_);
    const bool had_fd = pending_fd_ >= 0;
    if (absl::Status s = connection_.receive_some(room, &got, &pending_fd_, deadline); !s.ok())
      return s;
    end_ += got;
    if (!had_fd && pending_fd_ >= 0) fd_at_ = read_ + (end_ - begin_) - 1;
  }
  return absl::OkStatus();
}

absl::Status MessageReader::next(Header* header, std::span<const std::byte>* payload, int* fd,
                                 absl::Time deadline, uint64_t max_size) {
  if (absl::Status s = fill(sizeof(Header), deadline); !s.ok()) return s;
  std::memcpy(header, buffer_.data() + begin_, sizeof(Header));
  if (header->size > max_size) {
    return absl::InternalError(
        absl::StrFormat("a message of %d bytes, more than the %d allowed", header->size, max_size));
  }
  if (absl::Status s = fill(sizeof(Header) + header->size, deadline); !s.ok()) return s;
  *payload = std::span<const std::byte>(buffer_.data() + begin_ + sizeof(Header), header->size);
  const uint64_t start = read_, length = sizeof(Header) + header->size;
  begin_ += length;
  read_ += length;
  if (fd != nullptr) *fd = -1;
  if (pending_fd_ >= 0 && fd_at_ < start + length) {
    if (fd != nullptr && fd_at_ >= start) {
      *fd = pending_fd_;
    } else {
      close(pending_fd_);  // not this message's: the peer is broken
    }
    pending_fd_ = -1;
  }
  return absl::OkStatus();
}

}  // namespace kad::server::worker
