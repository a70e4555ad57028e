// One fd through a Unix socket (SCM_RIGHTS), for the tests that park a DRM
// fd in a socket or pass it to another process. Header-only: the VM
// workload binary uses it too.
#pragma once

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace tally::testing {

// Sends `fd` with one byte; 0 or -errno.
inline int sendFd(int sock, int fd) {
  char byte = 'f';
  iovec iov{&byte, 1};
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))] = {};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = ctl;
  m.msg_controllen = sizeof ctl;
  cmsghdr* cm = CMSG_FIRSTHDR(&m);
  if (!cm) return -EINVAL;
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(cm), &fd, sizeof(int));
  return ::sendmsg(sock, &m, 0) == 1 ? 0 : -errno;
}

// The fd sent with one byte, or -errno.
inline int recvFd(int sock) {
  char byte = 0;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))] = {};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = ctl;
  m.msg_controllen = sizeof ctl;
  if (::recvmsg(sock, &m, 0) != 1) return -errno;
  cmsghdr* cm = CMSG_FIRSTHDR(&m);
  if (!cm || cm->cmsg_type != SCM_RIGHTS) return -EPROTO;
  int fd = -1;
  std::memcpy(&fd, CMSG_DATA(cm), sizeof(int));
  return fd;
}

}  // namespace tally::testing
