// Service, the reload half: the config read again (SIGHUP, `tally daemon
// reload`, `systemctl reload tally`) and its pools and declared leases
// applied in place, never stranding a live lease (Service::reload).
#include <fmt/format.h>
#include <syslog.h>

#include <algorithm>
#include <set>

#include "bpf/sizing.h"
#include "config/diff.h"
#include "daemon/service.h"
#include "ledger/ledger.h"
#include "rpc/messages.h"
#include "util/text.h"

namespace tally::daemon {

namespace code = rpc::code;

namespace {
// Refused waiters named in a reload's reply; the rest are counted in one line
// (each is an event and a journal line all the same).
constexpr std::size_t kReloadLinesPerKind = 64;
}  // namespace

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

  // The kernel charge's lease map holds an entry per armed lease and per
  // ended lease whose buffers live on; it was made with kLeaseSlotsPerWaiter
  // slots for each lease admitted then (bpf/sizing.h), and it outlives the
  // daemon. Pools whose capacities alone would take more than that share of
  // it are refused here, where the operator reads why: a full map refuses
  // leases at their start.
  if (env_.kernelCharge) {
    std::uint64_t holders = 0;
    for (const auto& p : next.pools) holders += p.capacity;
    std::uint64_t room = env_.kernelCharge->totals().leasesCapacity;
    if (room && holders > room / bpf::kLeaseSlotsPerWaiter)
      return refused(fmt::format(
          "the pools' capacities add up to {} leases at once, more than the kernel charge's "
          "maps have room for ({} slots, {} per lease); keep the capacities at {} in all, or, "
          "once no lease runs, stop the daemon, remove /sys/fs/bpf/tally and start it (the "
          "maps are made anew for the new pools)",
          holders, room, bpf::kLeaseSlotsPerWaiter, room / bpf::kLeaseSlotsPerWaiter));
  }
  // Pools first: the one step that can refuse, taken before anything changes
  // (every reload, so the engine keeps the file's order of pools too).
  auto totals = [this](const config::Pool& pool) { return measures_.totalsFor(pool); };
  auto reconfigured = book_.reconfigure(next.pools, totals);
  if (!reconfigured)
    return refused(
        fmt::format("{}. Let those leases end, or keep the limits they hold, and "
                    "reload again",
                    reconfigured.error().message));
  std::vector<admission::Engine::Dropped> dropped = std::move(*reconfigured);
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

  // A waiter whose pool's new access list leaves its asker out is refused
  // too: access is checked at arrival, and a narrowed list must not let an
  // earlier request through.
  // Only when an access list changed: a reload that changed none must not
  // refuse anyone because a name service failed to answer this time.
  bool accessChanged = std::any_of(changes.pools.begin(), changes.pools.end(), [](const auto& c) {
    return c.find(".allow_users ") != std::string::npos ||
           c.find(".allow_groups ") != std::string::npos;
  });
  std::vector<std::pair<std::string, std::string>> forbidden;
  for (const auto& entry : book_.all()) {
    if (!accessChanged) break;
    const std::string& id = entry.first;  // named, not bound: the lambda below reads it
    const Lease& l = *entry.second;
    if (l.state() != Lease::State::Queued) continue;
    auto why = poolRefusal(access_, Peer{l.peerPid, l.owner, l.peerGid, l.peerGroups}, l.req.pools);
    bool listed =
        std::any_of(dropped.begin(), dropped.end(), [&](const auto& d) { return d.id == id; });
    if (why && !listed) forbidden.emplace_back(id, *why);
  }
  // (Still in the queue: forget() below takes them out of it.)
  for (const auto& [id, why] : forbidden) dropped.push_back({id, why});
  // Each refused waiter hears why and is an event; the reply lists the first
  // ones (a reply has room for kMaxReloadChanges lines), the journal all.
  std::size_t told = 0;
  for (const auto& d : dropped) {
    Lease* l = book_.find(d.id);
    if (!l) continue;
    bool allowed = std::none_of(forbidden.begin(), forbidden.end(),
                                [&](const auto& f) { return f.first == d.id; });
    std::string why = allowed ? fmt::format("the reloaded config can never grant it: {}", d.why)
                              : fmt::format("the reloaded config's access list: {}", d.why);
    events_.leftQueue(*l, rpc::api::kReloadRefusedKind, why);
    fail(l->client().conn, l->client().pendingId, allowed ? code::kRefused : code::kForbidden, why);
    if (++told <= kReloadLinesPerKind)
      lines.push_back(fmt::format("lease {} ({}) refused: {}", l->id, l->name(), d.why));
    book_.forget(d.id);
  }
  if (told > kReloadLinesPerKind)
    lines.push_back(
        fmt::format("and {} more waiters refused (the journal lists each: "
                    "journalctl -u tally TALLY_EVENT=refused-by-reload)",
                    told - kReloadLinesPerKind));

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
    // A run refused under the old pools (or the old declaration) is tried
    // once under the new ones; an unchanged reload retries nothing.
    bool changed = !changes.pools.empty() || !followed;
    for (const auto& c : changes.leases)
      changed = changed || c.starts_with(fmt::format("leases.{}.", d.name));
    if (!changed) continue;
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
  // A reply line has a size (rpc::api::kMaxReloadLineBytes): a long one
  // (an access list of hundreds of names) is cut there, whole in the journal.
  for (const auto& line : lines)
    events_.note(LOG_NOTICE, fmt::format("config reload: {}", line), {});
  for (auto& line : lines)
    if (line.size() > rpc::api::kMaxReloadLineBytes / 2)
      line = text::truncateUtf8(line, rpc::api::kMaxReloadLineBytes / 2) + "…";
  if (lines.size() > rpc::api::kMaxReloadChanges) {
    std::size_t more = lines.size() - (rpc::api::kMaxReloadChanges - 1);
    lines.resize(rpc::api::kMaxReloadChanges - 1);
    lines.push_back(fmt::format("and {} more changes (the journal has each)", more));
  }
  residueChanged();
  tryGrant();  // a raised limit may admit waiters now
  return lines;
}

}  // namespace tally::daemon
