// Why a client may not connect to the daemon's socket (EACCES), said so the
// person reading it knows what to do: join the socket's group, log in again
// when they joined it after this session began, or ask for the group to be set.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

namespace tally::rpc {

// What the refusal is about, read at the edge (socketAccessFacts).
struct SocketAccess {
  std::string path;
  std::optional<gid_t> socketGid;  // absent: the socket could not be stat()ed
  std::string groupName;           // of socketGid; empty when it has none
  std::string userName;            // the caller's; empty when unknown
  bool listedInGroup = false;      // the group database names the caller as a member
  bool sessionHasGroup = false;    // this process carries the gid (primary or supplementary)
};

SocketAccess socketAccessFacts(const std::string& path);

// The hint appended to "cannot reach the tally daemon at PATH: Permission denied".
std::string socketAccessHint(const SocketAccess& facts);

}  // namespace tally::rpc
