#include "daemon/pool_access.h"

#include <fmt/format.h>
#include <grp.h>
#include <pwd.h>

#include <algorithm>
#include <vector>

#include "util/text.h"

namespace tally::daemon {

namespace {

std::optional<std::uint32_t> numericId(const std::string& s) {
  auto n = text::parseU64(s);
  if (!n || *n >= 0xffffffffu) return std::nullopt;
  return static_cast<std::uint32_t>(*n);
}

}  // namespace

NameLookup systemLookup() {
  NameLookup l;
  l.user = [](const std::string& name) -> std::optional<uid_t> {
    if (auto n = numericId(name)) return *n;
    std::vector<char> buf(16384);
    passwd pw{}, *found = nullptr;
    if (::getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &found) != 0 || !found)
      return std::nullopt;
    return found->pw_uid;
  };
  l.group = [](const std::string& name) -> std::optional<gid_t> {
    if (auto n = numericId(name)) return *n;
    std::vector<char> buf(65536);
    group gr{}, *found = nullptr;
    if (::getgrnam_r(name.c_str(), &gr, buf.data(), buf.size(), &found) != 0 || !found)
      return std::nullopt;
    return found->gr_gid;
  };
  return l;
}

PoolAccess resolveAccess(const config::Config& cfg, const NameLookup& lookup) {
  PoolAccess a;
  for (const auto& p : cfg.pools) {
    if (p.allowUsers.empty() && p.allowGroups.empty()) continue;
    auto& allowed = a.pools[p.name];
    for (const auto& u : p.allowUsers) {
      if (auto id = lookup.user(u))
        allowed.uids.insert(*id);
      else
        a.unresolved.push_back(fmt::format("pools.{}.allow_users: no user '{}'", p.name, u));
    }
    for (const auto& g : p.allowGroups) {
      if (auto id = lookup.group(g))
        allowed.gids.insert(*id);
      else
        a.unresolved.push_back(fmt::format("pools.{}.allow_groups: no group '{}'", p.name, g));
    }
  }
  if (const auto& g = cfg.daemon.priorityGroup) {
    a.priorityGid = lookup.group(*g);
    if (!a.priorityGid)
      a.unresolved.push_back(fmt::format("daemon.priority_group: no group '{}'", *g));
  }
  return a;
}

bool inGroup(const Peer& peer, gid_t gid) {
  return peer.gid == gid ||
         std::find(peer.groups.begin(), peer.groups.end(), gid) != peer.groups.end();
}

std::optional<std::string> poolRefusal(const PoolAccess& access, const Peer& peer,
                                       const std::vector<std::string>& pools) {
  if (peer.uid == 0) return std::nullopt;
  for (const auto& name : pools) {
    auto it = access.pools.find(name);
    if (it == access.pools.end()) continue;
    const auto& allowed = it->second;
    if (allowed.uids.count(peer.uid)) continue;
    if (std::any_of(allowed.gids.begin(), allowed.gids.end(),
                    [&](gid_t g) { return inGroup(peer, g); }))
      continue;
    return fmt::format(
        "uid {} may not use pool {}: it is reserved by its allow_users and "
        "allow_groups in the config; ask the operator to add you, or use another "
        "pool",
        peer.uid, name);
  }
  return std::nullopt;
}

}  // namespace tally::daemon
