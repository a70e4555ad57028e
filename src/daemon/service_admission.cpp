// Service, the admission half: who may ask for a lease and what it waits
// for (acquire, attach, join), the grant pass, and what a grant does.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>

#include "daemon/lease_rows.h"
#include "daemon/service.h"
#include "devices/unmeterable.h"
#include "lease/attributes.h"
#include "lease/spec.h"
#include "probes/proc_cgroup.h"
#include "rpc/messages.h"
#include "util/clock.h"
#include "util/text.h"

namespace tally::daemon {

using json = nlohmann::json;
namespace code = rpc::code;

std::vector<std::string> Service::poolDevices(const std::vector<std::string>& pools) const {
  std::vector<std::string> out;
  for (const auto& name : pools) {
    const config::Pool* p = cfg_.pool(name);
    if (!p || p->devices.empty()) return {};  // a pool of every device: the lease may use any
    out.insert(out.end(), p->devices.begin(), p->devices.end());
  }
  return out;
}

admission::HeadroomFn Service::headroom() {
  return [this](const config::Pool& pool) { return measures_.headroomFor(pool); };
}

// acquire (a run lease: the client will run the scope) and attach (the daemon
// adopts a workload that already runs) share admission.
void Service::onAcquire(std::uint64_t conn, const Peer& peer, const json& id,
                        const rpc::api::Declared& d, const rpc::api::Attach* attach) {
  if (attach && attach->join && joined(conn, peer, id, *attach)) return;
  if (auto a = admit(conn, peer, id, d, attach); a.denial) deny(conn, id, *a.denial);
}

// Attach-or-join: the cgroup's running lease, when its caller holds it in
// the same place (same owner, same parent), is the answer, said as joined.
// Anything else takes the attach path, which refuses a second lease of it.
bool Service::joined(std::uint64_t conn, const Peer& peer, const json& id,
                     const rpc::api::Attach& a) {
  const Lease* l = book_.ofCgroup(a.target.cgroup, 0);
  if (!l || !l->isAttach() || l->state() != Lease::State::Running || l->owner != peer.uid ||
      l->parent != a.parent)
    return false;
  auto r = views_.leaseReply(*l);
  r.view["joined"] = true;
  reply(conn, id, rpc::api::encode(r));
  return true;
}

Service::Admission Service::admit(std::uint64_t conn, const Peer& peer, const json& id,
                                  const rpc::api::Declared& d, const rpc::api::Attach* attach) {
  auto refused = [](const char* c, std::string message) {
    return Admission{Denial{c, std::move(message)}, false};
  };
  // Fail closed: damage in the ledger no operator accepted means its record
  // of what was granted cannot be trusted, so nothing new is granted.
  if (!ledgerDamage_.empty()) {
    return refused(
        code::kUnavailable,
        fmt::format("no lease is granted while the ledger {} holds damage no operator accepted "
                    "({}). An operator runs 'tally ledger verify', then restores the ledger from "
                    "a backup or accepts the damage with 'tally ledger acknowledge' and restarts "
                    "the daemon",
                    ledger_.path(), fmt::join(ledgerDamage_, "; ")));
  }
  if (auto room = book_.roomToWait(conn, peer.uid, env_.limits); !room)
    return refused(code::kBusy, room.error().message);
  if (auto room =
          book_.roomForLease(peer.uid, attach ? attach->parent : std::string(), env_.limits);
      !room)
    return refused(code::kBusy, room.error().message);
  if (auto wait = events_.rowBudget().wait(peer.uid, clock::monotonicUs())) {
    const auto& b = events_.rowBudget();
    return refused(
        code::kRateLimited,
        fmt::format(
            "uid {}'s leases wrote more than {} in the last minute ({}); ask for a new "
            "lease again in {} s. Leases that exist go on and are recorded",
            peer.uid,
            wait->bytes ? fmt::format("{} bytes of ledger rows", b.bytesPerMinute())
                        : fmt::format("{} ledger rows", b.rowsPerMinute()),
            wait->bytes ? "ledger_bytes_per_minute_per_uid" : "ledger_rows_per_minute_per_uid",
            (wait->us + 999'999) / 1'000'000));
  }
  // A pool reserved for some (Slurm's, a declared lease's) is theirs alone.
  if (auto why = poolRefusal(access_, peer, d.pools)) return refused(code::kForbidden, *why);
  // Provenance is the daemon's: no user's lease poses as a Slurm step.
  if (peer.uid != 0) {
    if (auto why = lease::rootOnlyDeclaration(d.declaration.name, d.declaration.attributes))
      return refused(code::kForbidden, *why);
  }
  // A detached job's keys only from the job itself (its client asks from
  // inside the job's service): tally logs trusts them.
  if (d.declaration.attributes.count(lease::kJobUnitKey) ||
      d.declaration.attributes.count(lease::kJobManagerKey)) {
    std::string asker;
    if (auto text = env_.proc.read(fmt::format("{}/cgroup", peer.pid), 64 * 1024)) {
      auto cg = probes::parseProcCgroup(*text);
      if (cg && !cg->deleted && !cg->outsideNamespace) asker = cg->path;
    }
    if (auto why = lease::jobKeysProblem(d.declaration.attributes, asker))
      return refused(code::kForbidden, *why);
  }
  // Ahead of everyone is the operator's call, not each user's own.
  if (d.priority > 0 && !mayPrioritise(peer)) {
    return refused(
        code::kForbidden,
        fmt::format("priority {} puts this request ahead of everyone else's; only root{} "
                    "may ask for a priority above 0. Ask without --priority",
                    d.priority,
                    cfg_.daemon.priorityGroup
                        ? " and members of group " + *cfg_.daemon.priorityGroup
                        : std::string()));
  }
  // Placed by the site's scheduler skips measured headroom: the plugin in
  // slurmstepd (root) says so, never a user for their own lease.
  if (d.placed && peer.uid != 0) {
    return refused(code::kForbidden,
                   "\"placed\" admits a lease past measured headroom on the word of the "
                   "site's scheduler; only root (the Slurm plugin in slurmstepd) may send it. "
                   "Ask without it");
  }
  auto kind = attach ? lease::LeaseKind::Attach : lease::LeaseKind::Run;
  // A child lease holds no pool: its parent's count it (placeAttach checks the parent).
  const bool child = attach && !attach->parent.empty();
  // What the request leaves undeclared, the pools' defaults declare (the
  // operator set them): its row and its bound say the figure, as if asked.
  rpc::api::Declared withDefaults = d;
  std::vector<std::string> defaulted;
  if (!child)
    defaulted = admission::fillDefaults(withDefaults.declaration, d.pools, book_.engine().pools());
  // A refusal names flags; where a pool's default gave the figure, it says so.
  auto fromDefaults = [&](std::string message) {
    if (!defaulted.empty())
      message += fmt::format(" ({} came from the pool's default_{}; declare it with the flag)",
                             fmt::join(defaulted, " and "), defaulted.front());
    return message;
  };
  auto l =
      newLease(kind, peer.uid, peer.pid, conn, withDefaults, cfg_.daemon, sampler_.kernelState());
  l->peerGid = peer.gid;
  l->peerGroups = peer.groups;
  auto totals = [this](const config::Pool& pool) { return measures_.totalsFor(pool); };
  if (!child) {
    if (auto s = book_.check(l->req, totals); !s)
      return refused(code::kRefused, fromDefaults(s.error().message));
  }
  // Fail closed: a bound on a device whose driver prints no figure would never fire.
  auto boundUnseen = [&]() -> std::optional<std::string> {
    if (!l->req.declaration.gpuMemoryMax) return std::nullopt;
    const Lease* parent = child ? book_.find(l->parent) : nullptr;
    return devices::gpuBoundRefusal(host_.recent().devices,
                                    poolDevices(parent ? parent->req.pools : l->req.pools));
  };
  if (!child) {
    if (auto why = boundUnseen()) return refused(code::kRefused, fromDefaults(*why));
  }
  if (attach) {
    PlacementEnv aenv{env_.proc,
                      env_.cgroupRoot,
                      env_.units,
                      env_.pageSize,
                      &env_.sys,
                      env_.kernelCharge,
                      env_.limits.maxCgroupsWalkedPerUid};
    if (auto denied = placeAttach(aenv, book_, peer, *attach, *l)) return {*denied, false};
    // A child's bound is known once it is placed (it may be its parent's).
    if (child) {
      if (auto why = boundUnseen()) return refused(code::kRefused, *why);
    }
    if (auto denied = refuseOverOnArrival(aenv, *l, attach->force)) return {*denied, false};
    // An attached workload's own use is already out of the measured free:
    // it needs only the rest of its declaration (a child holds no pool).
    if (!child) measures_.noteHeld(env_.proc, env_.sys, *l);
    l->expectReport(attach->reportsExit);
    l->keepWhenEmpty(attach->keepWhenEmpty);
  }
  // A declared lease (no connection) has nobody to reply to.
  l->awaitReply(conn, id);
  std::string arrival = l->id;
  // A placed lease is not held back by measured headroom: what it lacked is
  // measured now, before the grant, and goes with its granted row.
  if (l->req.placed) {
    for (const auto& name : l->req.pools)
      for (const auto& pool : book_.engine().pools())
        if (pool.name == name && !l->shortfall)
          l->shortfall = admission::shortfallIn(l->req, pool, measures_.headroomFor(pool));
  }
  // Only the new arrival's fate can have changed: no walk of a long queue.
  const bool noWait = d.noWait;
  auto grants = book_.enqueue(std::move(l), headroom());
  if (std::find(grants.begin(), grants.end(), arrival) == grants.end()) {
    // It would wait. A request that must not is refused now, with the reason.
    if (noWait) {
      auto wait = book_.waitOf(arrival, headroom());
      std::string why = wait ? rpc::api::waitWords(LeaseEvents::queuedEvent(*wait)) : "it waits";
      book_.forget(arrival);  // leaves the queue as if it never came
      // What to do next is the client's to say: `tally attach` can --wait, a
      // Slurm step cannot (Slurm placed it; it is refused and Slurm reports it).
      return {Denial{code::kRefused, fmt::format("{}{}", rpc::api::kCannotBeGrantedNow, why)},
              true};
    }
    if (const Lease* waiting = book_.find(arrival)) events_.queued(*waiting);
  }
  std::optional<Denial> arrivalRefused;
  for (const auto& gid : grants) {
    Lease* g = book_.find(gid);
    if (!g) continue;
    // May refuse and forget the new lease; a client waiting was told by granted().
    auto why = granted(*g);
    if (why && gid == arrival && conn == 0) arrivalRefused = Denial{code::kRefused, *why};
  }
  // Only the waiters whose place or reason changed (the new one, at least).
  events_.positions(book_.moves(headroom()));
  return {arrivalRefused, false};
}

bool Service::mayPrioritise(const Peer& peer) const {
  // The group resolved at start, the peer's groups as the kernel gave them
  // at accept: no NSS look-up per request (an LDAP stall once stalled the loop).
  if (peer.uid == 0) return true;
  return access_.priorityGid && inGroup(peer, *access_.priorityGid);
}

void Service::tryGrant() {
  if (book_.queued() == 0) return;
  // A waiting attach is measured again: what it freed while it waited is in
  // the measured free now, so it no longer counts as held (only lowers).
  std::vector<std::string> waitingAttaches;
  for (const admission::Request* q : book_.engine().queue())
    if (q->heldHostBytes || q->heldGpuBytes) waitingAttaches.push_back(q->id);
  for (const auto& wid : waitingAttaches) {
    Lease* w = book_.find(wid);
    if (!w) continue;
    measures_.noteHeld(env_.proc, env_.sys, *w);
    book_.lowerHeld(wid, w->req.heldHostBytes, w->req.heldGpuBytes);
  }
  for (const auto& id : book_.grant(headroom())) {
    if (Lease* l = book_.find(id)) granted(*l);
  }
  events_.positions(book_.moves(headroom()));
}

std::optional<std::string> Service::granted(Lease& l) {
  book_.markGranted(l);
  if (auto ev = events_.record(l, ledger::kGranted, ledger::encode(grantedRow(l)), l.grantedAtNs());
      !ev) {
    // Fail closed: a lease the ledger cannot record is not granted.
    std::string why = fmt::format(
        "not granted: the ledger could not record the grant ({}); nothing was granted. Retry "
        "once the ledger writes (tally daemon's journal says when)",
        ev.error().message);
    if (l.client().pending) fail(l.client().conn, l.client().pendingId, code::kUnavailable, why);
    book_.forget(std::string(l.id));
    return why;
  }
  if (l.isAttach()) {
    PlacementEnv aenv{env_.proc, env_.cgroupRoot, env_.units, env_.pageSize};
    // Armed before anything of the workload's is touched: a lease the
    // kernel's charge cannot cover is refused, never run blind.
    Status s = sampler_.arm(l);
    if (s) s = adopt(aenv, l);
    if (s) {
      l.markRunning(clock::realtimeNs());
      if (auto ev =
              events_.record(l, ledger::kAdopted, ledger::encode(placedRow(l)), l.startedAtNs());
          !ev)
        s = ev.error();
    }
    if (!s) {
      std::string why = s.error().message;
      if (l.client().pending) fail(l.client().conn, l.client().pendingId, code::kRefused, why);
      endings_.withdraw(l, why);  // frees l
      return why;
    }
    noteInvocation(env_.units, l);
    sampler_.startMetering(l);
    if (l.target && l.target->pid) (void)env_.watches.watchPid(l.id, *l.target->pid);
  }
  // Counted once the lease stands (an attach withdrawn above was never placed).
  if (l.shortfall) events_.placedShortfall(l, *l.shortfall);
  if (l.client().pending) {
    reply(l.client().conn, l.client().pendingId, rpc::api::encode(views_.leaseReply(l)));
    l.replied();
  }
  if (l.isAttach()) l.clientGone();  // an attached lease lives on without its client
  return std::nullopt;
}

}  // namespace tally::daemon
