#include "metrics/peer_uid.h"

#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "metrics/sock_diag.h"
#include "util/unique_fd.h"

namespace tally::metrics {

namespace {

bool loopback(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET)
    return (ntohl(reinterpret_cast<const sockaddr_in&>(a).sin_addr.s_addr) >> 24) == 127;
  if (a.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(a).sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(&in6)) return true;
    // ::ffff:127.x.y.z, as a dual-stack listener sees an IPv4 loopback peer.
    return IN6_IS_ADDR_V4MAPPED(&in6) && in6.s6_addr[12] == 127;
  }
  return false;
}

// The address bytes and port of `a` into an inet_diag socket id's half.
void put(const sockaddr_storage& a, __be16& port, __be32 (&addr)[4]) {
  std::memset(addr, 0, sizeof addr);
  if (a.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(a);
    port = in.sin_port;
    std::memcpy(addr, &in.sin_addr, sizeof in.sin_addr);
  } else {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(a);
    port = in6.sin6_port;
    std::memcpy(addr, &in6.sin6_addr, sizeof in6.sin6_addr);
  }
}

}  // namespace

Result<uid_t> loopbackPeerUid(int connFd) {
  sockaddr_storage local{}, peer{};
  socklen_t ll = sizeof local, pl = sizeof peer;
  if (::getsockname(connFd, reinterpret_cast<sockaddr*>(&local), &ll) != 0 ||
      ::getpeername(connFd, reinterpret_cast<sockaddr*>(&peer), &pl) != 0)
    return errnoError(errno, "read the metrics connection's addresses");
  if (!loopback(peer) || peer.ss_family != local.ss_family)
    return Error{EPERM, "the peer is not on this host's loopback: its user cannot be known"};
  UniqueFd nl(::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
  if (!nl.valid()) return errnoError(errno, "open NETLINK_SOCK_DIAG");
  struct {
    nlmsghdr nh;
    inet_diag_req_v2 req;
  } msg{};
  msg.nh.nlmsg_len = sizeof msg;
  msg.nh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  msg.nh.nlmsg_flags = NLM_F_REQUEST;
  msg.req.sdiag_family = static_cast<__u8>(local.ss_family);
  msg.req.sdiag_protocol = IPPROTO_TCP;
  msg.req.idiag_states = ~0u;
  // The peer's own socket: its source is our destination and back.
  put(peer, msg.req.id.idiag_sport, msg.req.id.idiag_src);
  put(local, msg.req.id.idiag_dport, msg.req.id.idiag_dst);
  msg.req.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
  msg.req.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (::sendto(nl.get(), &msg, sizeof msg, 0, reinterpret_cast<sockaddr*>(&kernel),
               sizeof kernel) != static_cast<ssize_t>(sizeof msg))
    return errnoError(errno, "ask the kernel for the metrics peer's socket");
  std::array<char, 8192> buf;
  ssize_t n;
  do {
    n = ::recv(nl.get(), buf.data(), buf.size(), 0);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return errnoError(errno, "read the kernel's answer about the metrics peer");
  return decodeSockDiagUid(std::string_view(buf.data(), static_cast<std::size_t>(n)));
}

}  // namespace tally::metrics
