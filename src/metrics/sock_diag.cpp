#include "metrics/sock_diag.h"

#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace tally::metrics {

Result<uid_t> decodeSockDiagUid(std::string_view reply) {
  // Messages one after another, each a header and its payload, aligned to
  // NLMSG_ALIGNTO; copied out (the buffer need not be aligned).
  std::size_t at = 0;
  while (reply.size() - at >= sizeof(nlmsghdr)) {
    nlmsghdr h;
    std::memcpy(&h, reply.data() + at, sizeof h);
    if (h.nlmsg_len < sizeof h || h.nlmsg_len > reply.size() - at)
      return Error{EPROTO, "the kernel's socket answer is cut short"};
    std::string_view payload = reply.substr(at + sizeof h, h.nlmsg_len - sizeof h);
    if (h.nlmsg_type == NLMSG_ERROR) {
      nlmsgerr e{};
      if (payload.size() < sizeof e) return Error{EPROTO, "the kernel's error answer is cut short"};
      std::memcpy(&e, payload.data(), sizeof e);
      int code = e.error < 0 ? -e.error : EPROTO;
      return Error{code, std::string("the kernel does not know the metrics peer's socket: ") +
                             std::strerror(code)};
    }
    if (h.nlmsg_type == NLMSG_DONE) break;
    if (h.nlmsg_type == SOCK_DIAG_BY_FAMILY) {
      inet_diag_msg m{};
      if (payload.size() < sizeof m)
        return Error{EPROTO, "the kernel's socket answer is cut short"};
      std::memcpy(&m, payload.data(), sizeof m);
      return static_cast<uid_t>(m.idiag_uid);
    }
    std::size_t next = (static_cast<std::size_t>(h.nlmsg_len) + NLMSG_ALIGNTO - 1) &
                       ~static_cast<std::size_t>(NLMSG_ALIGNTO - 1);
    if (next > reply.size() - at) break;
    at += next;
  }
  return Error{ENOENT, "the kernel named no socket for the metrics peer"};
}

}  // namespace tally::metrics
