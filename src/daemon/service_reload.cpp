// Service, the reload half: the config read again (SIGHUP, `tally daemon
// reload`, `systemctl reload tally`) and its pools and declared leases
// applied in place, never stranding a live lease (Service::reload).
#include <fmt/format.h>
#include <syslog.h>

#include <set>

#include "config/diff.h"
#include "daemon/service.h"
#include "ledger/ledger.h"
#include "rpc/messages.h"

namespace tally::daemon {

namespace code = rpc::code;

Result<std::vector<std::string>> Service::reload() {
  auto refused = [this](const std::string& why) -> Error {
    events_.note(LOG_WARNING, fmt::format("config reload refused, nothing changed: {}", why), {});
    return Error{0, why};
  };
  if (!env_.readConfig)
    return refused("this daemon has no config file to read again; restart it with --config FILE");
  auto read = env_.readConfig();
  if (!read) return refused(read.error().message);
  config::Config next = std::move(*read);
  if (next.daemon.stateDir.empty()) next.daemon.stateDir = ledger::defaultStateDir();
  const config::Changes changes = config::differences(cfg_, next);

  // Pools first: the one step that can refuse, taken before anything changes.
  std::vector<admission::Engine::Dropped> dropped;
  if (!changes.pools.empty()) {
    auto totals = [this](const config::Pool& pool) { return measures_.totalsFor(pool); };
    auto r = book_.reconfigure(next.pools, totals);
    if (!r)
      return refused(
          fmt::format("{}. Let those leases end, or keep the limits they hold, and "
                      "reload again",
                      r.error().message));
    dropped = std::move(*r);
  }
  std::vector<std::string> lines = changes.pools;
  const std::vector<config::DeclaredLease> before = cfg_.leases;
  cfg_.pools = next.pools;
  cfg_.leases = next.leases;
  // Names resolve on the loop here, once per reload, as at start.
  access_ = resolveAccess(cfg_, env_.names ? *env_.names : systemLookup());
  for (const auto& name : access_.unresolved)
    lines.push_back(
        fmt::format("{}: it admits nobody until it resolves and the config is "
                    "reloaded",
                    name));

  for (const auto& d : dropped) {
    Lease* l = book_.find(d.id);
    if (!l) continue;
    std::string why = fmt::format("the reloaded config can never grant it: {}", d.why);
    events_.leftQueue(*l, rpc::api::kReloadRefusedKind, why);
    fail(l->client().conn, l->client().pendingId, code::kRefused, why);
    lines.push_back(fmt::format("lease {} ({}) refused: {}", l->id, l->name(), d.why));
    book_.forget(d.id);
  }

  // Declared leases: a live lease keeps what it was granted; the
  // declaration as it is now applies from its unit's next run.
  lines.insert(lines.end(), changes.leases.begin(), changes.leases.end());
  std::set<std::string> units;
  for (const auto& d : cfg_.leases) units.insert(d.unit());
  for (const auto& d : before) {
    if (units.count(d.unit())) continue;
    declared_.byUnit.erase(d.unit());
    if (const Lease* l = leaseOfUnit(d.unit()))
      lines.push_back(
          fmt::format("leases.{}: {}'s live lease {} ends with its run; its later "
                      "runs are not leased",
                      d.name, d.unit(), l->id));
  }
  for (const auto& d : cfg_.leases) {
    bool followed = false;
    for (const auto& b : before) followed = followed || b.unit() == d.unit();
    if (const Lease* l = leaseOfUnit(d.unit()); l && followed) {
      std::string prefix = fmt::format("leases.{}.", d.name);
      for (const auto& c : changes.leases)
        if (c.starts_with(prefix)) {
          lines.push_back(
              fmt::format("leases.{}: lease {} keeps what it was granted; the new "
                          "declaration applies from {}'s next run",
                          d.name, l->id, d.unit()));
          break;
        }
      continue;
    }
    if (!env_.units) continue;
    if (!followed) {
      if (auto s = env_.units->watchUnit(d.unit()); !s) {
        lines.push_back(
            fmt::format("leases.{}: {} not followed: {}", d.name, d.unit(), s.error().message));
        continue;
      }
    }
    // A run refused under the old pools is tried once under the new ones.
    DeclaredRun& st = declared_.byUnit[d.unit()];
    st.refusedInvocation.clear();
    st.refusedWhy.clear();
    leaseDeclared(d);
    if (const Lease* l = leaseOfUnit(d.unit()))
      lines.push_back(fmt::format("leases.{}: {} leased ({})", d.name, d.unit(), l->id));
  }

  for (const auto& key : changes.daemon)
    lines.push_back(fmt::format("{} (read at start only: applies at the next restart)", key));
  if (lines.empty()) lines.push_back("nothing changed");
  for (const auto& line : lines)
    events_.note(LOG_NOTICE, fmt::format("config reload: {}", line), {});
  residueChanged();
  tryGrant();  // a raised limit may admit waiters now
  return lines;
}

}  // namespace tally::daemon
