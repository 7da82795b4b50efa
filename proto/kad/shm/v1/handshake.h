// The channel socket's answer to a hello (layout.h's Reply) and the memfd
// that comes with a successful one (SCM_RIGHTS), sent by the daemon and
// received by the client: one implementation of the ancillary-data handling
// for both sides. When kad ends a channel it sends one more Reply, without
// an fd: UNAVAILABLE and why (the header's close_reason, which kad frees
// with the channel's memory when it reaps the channel).
#pragma once

#include <sys/socket.h>

#include <cstring>

#include "kad/shm/v1/layout.h"

namespace kad::shm::v1 {

// Sends `reply`, with `fd` attached when it is not -1. False when the whole
// reply could not be sent (the peer is gone; with `wait` false, also where
// the socket had no room for it).
inline bool send_reply(int socket, const Reply& reply, int fd, bool wait = true) {
  Reply copy = reply;
  iovec io{&copy, sizeof(copy)};
  msghdr msg{};
  msg.msg_iov = &io;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  if (fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  }
  return sendmsg(socket, &msg, MSG_NOSIGNAL | (wait ? 0 : MSG_DONTWAIT)) ==
         static_cast<ssize_t>(sizeof(copy));
}

// Receives a reply and the fd that came with it (-1 when none did; received
// close-on-exec). False when no whole reply arrived (with `wait` false: none
// had arrived).
inline bool receive_reply(int socket, Reply* reply, int* fd, bool wait = true) {
  *reply = Reply{};
  *fd = -1;
  iovec io{reply, sizeof(*reply)};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  msghdr msg{};
  msg.msg_iov = &io;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  if (recvmsg(socket, &msg, MSG_CMSG_CLOEXEC | (wait ? 0 : MSG_DONTWAIT)) !=
      static_cast<ssize_t>(sizeof(*reply)))
    return false;
  if (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr && c->cmsg_type == SCM_RIGHTS) {
    std::memcpy(fd, CMSG_DATA(c), sizeof(int));
  }
  return true;
}

}  // namespace kad::shm::v1
