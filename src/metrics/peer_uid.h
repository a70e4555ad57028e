// Who is on the other end of a loopback TCP connection: the uid that owns
// the peer's socket, as the kernel's socket table says (NETLINK_SOCK_DIAG,
// inet_diag: the socket matched by its four-tuple, idiag_uid). A Unix
// socket has SO_PEERCRED; a TCP connection has nothing of the kind, and
// /proc/net/tcp is a whole-table text scan. Only a loopback peer is a local
// process whose socket the kernel can name; any other is refused here.
#pragma once

#include <sys/types.h>

#include "util/result.h"

namespace tally::metrics {

Result<uid_t> loopbackPeerUid(int connFd);

}  // namespace tally::metrics
