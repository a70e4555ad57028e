// Who may use what, decided without a look-up on the event loop: the names
// of the config (a pool's allow_users and allow_groups, the daemon's
// priority_group) are resolved to ids once, when the daemon starts, and a
// peer's groups are the kernel's (SO_PEERGROUPS, read at accept). An LDAP
// or SSSD stall can slow the start, never a request.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "config/config.h"
#include "daemon/seams.h"

namespace tally::daemon {

// A name (or a numeric id) to its id; nullopt: no such user or group.
struct NameLookup {
  std::function<std::optional<uid_t>(const std::string&)> user;
  std::function<std::optional<gid_t>(const std::string&)> group;
};
// getpwnam_r / getgrnam_r; a string of digits is the id itself.
NameLookup systemLookup();

struct PoolAccess {
  struct Allowed {
    std::set<uid_t> uids;
    std::set<gid_t> gids;
  };
  std::map<std::string, Allowed> pools;  // only pools with an access list
  std::optional<gid_t> priorityGid;      // [daemon] priority_group, resolved
  // Names that resolved to nothing: they admit nobody (said at start).
  std::vector<std::string> unresolved;
};

PoolAccess resolveAccess(const config::Config& cfg, const NameLookup& lookup);

// Whether the peer's uid, primary group or a supplementary group is `gid`.
bool inGroup(const Peer& peer, gid_t gid);

// The first of `pools` the peer may not ask for, with the sentence that says
// so and how to get in; nullopt: she may ask for all of them. Root may always.
std::optional<std::string> poolRefusal(const PoolAccess& access, const Peer& peer,
                                       const std::vector<std::string>& pools);

}  // namespace tally::daemon
