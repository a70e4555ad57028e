#include "daemon/service.h"

#include <fmt/format.h>
#include <grp.h>
#include <pwd.h>
#include <syslog.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include "cgroup/path.h"
#include "daemon/lease_rows.h"
#include "daemon/recovery.h"
#include "devices/unmeterable.h"
#include "lease/attributes.h"
#include "lease/spec.h"
#include "ledger/rows.h"
#include "probes/proc_cgroup.h"
#include "rpc/messages.h"
#include "util/clock.h"
#include "util/text.h"

namespace tally::daemon {

using json = nlohmann::json;
namespace code = rpc::code;

Service::Service(const config::Config& cfg, ledger::Ledger& ledger, ServiceEnv env)
    : cfg_(cfg),
      ledger_(ledger),
      env_(env),
      handover_{coverage::Coverage::HostOnly, cfg_.daemon.keepGpuMemoryMax},
      book_(cfg_.pools),
      events_(ledger, env.outbox, env.journal),
      upkeep_(env.kernelCharge, env.sys, ledger, events_),
      host_(env.proc, env.sys, env.pageSize),
      measures_(book_, host_, handover_),
      sampler_(cfg_.daemon,
               SamplerEnv{env.proc, env.sys, env.cgroupRoot, env.watches, env.units,
                          env.monotonicUs, env.kernelCharge},
               ledger, book_, events_, host_, handover_),
      endings_(cfg_.daemon, EndingsEnv{env.cgroupRoot, env.watches, env.units}, ledger, book_,
               events_, [this] { tryGrant(); }),
      views_(cfg_, ledger, book_, measures_, host_, events_, handover_, coverageKernel_) {
  events_.rowBudget() = RowBudget(env.limits.ledgerRowsPerMinutePerUid);
  endings_.beforeRecord([this](Lease& l) { sampler_.finalRefusals(l); });
  views_.setKernelUpkeep(&upkeep_);
  // A lease that ends leaves the kernel's charge: its record has the final
  // figures by then; buffers it made that outlive it stay counted (in its
  // parent's charge, against its pools) until freed.
  if (env.kernelCharge) {
    book_.onForget([this](const Lease& l) {
      const Lease* parent = l.parent.empty() ? nullptr : book_.find(l.parent);
      upkeep_.retire(l, parent ? parent->metering.kernelArmed : 0);
      // Counted against its pools before the grant pass its end starts.
      for (const auto& pool : l.req.pools) book_.setGpuResidue(pool, upkeep_.poolResidue(pool));
    });
  }
}

void Service::reply(std::uint64_t conn, const json& id, const json& result) {
  if (conn) env_.outbox.send(conn, rpc::encodeReply(id, result));
}

void Service::fail(std::uint64_t conn, const json& id, const char* c, const std::string& message) {
  if (conn) env_.outbox.send(conn, rpc::encodeError(id, {c, message}));
}

std::string Service::statusLine() const {
  return fmt::format("{} held, {} queued, {}", text::counted(book_.live(), "lease", "leases"),
                     book_.queued(), text::counted(cfg_.pools.size(), "pool", "pools"));
}

Lease* Service::owned(std::uint64_t conn, const Peer& peer, const json& id,
                      const std::string& lease) {
  Lease* l = book_.find(lease);
  if (!l) {
    fail(conn, id, code::kNotFound,
         fmt::format("no live lease {} (ended leases are in 'tally ledger')", lease));
    return nullptr;
  }
  if (peer.uid != 0 && peer.uid != l->owner) {
    fail(conn, id, code::kForbidden,
         fmt::format("lease {} belongs to uid {}; only its owner or root may do this", lease,
                     l->owner));
    return nullptr;
  }
  return l;
}

void Service::handle(std::uint64_t conn, const Peer& peer, const rpc::Request& req) {
  using rpc::api::Method;
  auto m = rpc::api::parseMethod(req.method);
  if (!m) {
    return fail(
        conn, req.id, code::kUnknownMethod,
        fmt::format("unknown method '{}' ({})", text::truncateUtf8(text::trim(req.method), 64),
                    rpc::api::methodList()));
  }
  // Every params object goes through its method's decoder; a refusal names the field.
  auto with = [&](auto decoded, auto&& then) {
    if (!decoded) return fail(conn, req.id, code::kInvalidParams, decoded.error().message);
    then(*decoded);
  };
  const json& id = req.id;
  const json& params = req.params;
  switch (*m) {
    case Method::Acquire:
      return with(rpc::api::decodeAcquire(params),
                  [&](auto& p) { onAcquire(conn, peer, id, p.declared, nullptr); });
    case Method::Attach:
      return with(rpc::api::decodeAttach(params),
                  [&](auto& p) { onAcquire(conn, peer, id, p.declared, &p); });
    case Method::Started:
      return with(rpc::api::decodeStarted(params), [&](auto& p) { onStarted(conn, peer, id, p); });
    case Method::Complete:
      return with(rpc::api::decodeComplete(params),
                  [&](auto& p) { onComplete(conn, peer, id, p); });
    case Method::Bound:
      return with(rpc::api::decodeBound(params), [&](auto& p) { onBound(conn, peer, id, p); });
    case Method::Exited:
      return with(rpc::api::decodeExited(params), [&](auto& p) { onExited(conn, peer, id, p); });
    case Method::Resume:
      return with(rpc::api::decodeLeaseRef(params),
                  [&](auto& p) { onResume(conn, peer, id, p.lease); });
    case Method::Release:
    case Method::Cancel:
      return with(rpc::api::decodeLeaseRef(params),
                  [&](auto& p) { onRelease(conn, peer, id, p.lease, *m == Method::Cancel); });
    case Method::Lease:
      return with(rpc::api::decodeLeaseQuery(params), [&](auto& p) { onLeaseQuery(conn, id, p); });
    case Method::Hello:
      return with(rpc::api::decodeEmpty(params), [&](auto&) {
        reply(conn, id,
              rpc::api::encode(rpc::api::HelloReply{rpc::kProtocolVersion, ::getpid(), peer.uid,
                                                    cfg_.daemon.stateDir}));
      });
    case Method::Subscribe:
      return with(rpc::api::decodeSubscribe(params), [&](auto& p) {
        // The reply, the ledger's rows since then, then the live events: all
        // sent before this handler returns, so nothing comes between them.
        auto replay = events_.replay(p);
        if (!replay)
          return fail(
              conn, id, code::kInternal,
              fmt::format("cannot read the ledger's rows to replay: {}", replay.error().message));
        reply(conn, id,
              rpc::api::encode(rpc::api::SubscribeReply{
                  {"lease", "gpu-bound", "coverage"}, replay->events.size(), replay->truncated}));
        for (const auto& [event, fields] : replay->events)
          env_.outbox.send(conn, rpc::encodeEvent(id, event, fields));
        events_.subscribe(conn, id);
      });
    case Method::Leases:
    case Method::Pools:
    case Method::Seats:
    case Method::Overview:
    case Method::Metrics:
      return with(rpc::api::decodeEmpty(params),
                  [&](auto&) { reply(conn, id, views_.answer(*m, clock::realtimeNs())); });
  }
}

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
  if (auto wait = events_.rowBudget().waitUs(peer.uid, clock::monotonicUs())) {
    return refused(
        code::kRateLimited,
        fmt::format("uid {}'s leases wrote more than {} ledger rows in the last minute "
                    "(ledger_rows_per_minute_per_uid); ask for a new lease again in {} s. Leases "
                    "that exist go on and are recorded",
                    peer.uid, events_.rowBudget().perMinute(), (*wait + 999'999) / 1'000'000));
  }
  // Provenance is the daemon's: no user's lease poses as a Slurm step.
  if (peer.uid != 0) {
    if (auto why = lease::rootOnlyDeclaration(d.name.value_or(""), d.attributes))
      return refused(code::kForbidden, *why);
  }
  // A detached job's keys only from the job itself (its client asks from
  // inside the job's service): tally logs trusts them.
  if (d.attributes.count("job_unit") || d.attributes.count("job_manager")) {
    std::string asker;
    if (auto text = env_.proc.read(fmt::format("{}/cgroup", peer.pid), 64 * 1024)) {
      auto cg = probes::parseProcCgroup(*text);
      if (cg && !cg->deleted && !cg->outsideNamespace) asker = cg->path;
    }
    if (auto why = lease::jobKeysProblem(d.attributes, asker))
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
  auto kind = attach ? lease::LeaseKind::Attach : lease::LeaseKind::Run;
  auto l = newLease(kind, peer.uid, peer.pid, conn, d, cfg_.daemon, env_.limits, handover_);
  // A child lease holds no pool: its parent's count it (placeAttach checks the parent).
  const bool child = attach && !attach->parent.empty();
  auto totals = [this](const config::Pool& pool) { return measures_.totalsFor(pool); };
  if (!child) {
    if (auto s = book_.check(l->req, totals); !s) return refused(code::kRefused, s.error().message);
  }
  // Fail closed: a bound on a device whose driver prints no figure would never fire.
  auto boundUnseen = [&]() -> std::optional<std::string> {
    if (!l->req.gpuMemoryMax) return std::nullopt;
    const Lease* parent = child ? book_.find(l->parent) : nullptr;
    return devices::gpuBoundRefusal(host_.recent().devices,
                                    poolDevices(parent ? parent->req.pools : l->req.pools));
  };
  if (!child) {
    if (auto why = boundUnseen()) return refused(code::kRefused, *why);
  }
  if (attach) {
    PlacementEnv aenv{env_.proc,     env_.cgroupRoot, env_.units,
                      env_.pageSize, &env_.sys,       env_.kernelCharge};
    if (auto denied = placeAttach(aenv, book_, peer, *attach, *l)) return {*denied, false};
    // A child's bound is known once it is placed (it may be its parent's).
    if (child) {
      if (auto why = boundUnseen()) return refused(code::kRefused, *why);
    }
    if (auto denied = refuseOverOnArrival(aenv, *l, attach->force)) return {*denied, false};
    l->ending.awaitsReport = attach->reportsExit;
  }
  // A declared lease (no connection) has nobody to reply to.
  l->client.pending = conn != 0;
  l->client.pendingId = id;
  std::string arrival = l->id;
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
  if (peer.uid == 0) return true;
  if (!cfg_.daemon.priorityGroup) return false;
  const group* g = ::getgrnam(cfg_.daemon.priorityGroup->c_str());
  if (!g) return false;
  if (peer.gid == g->gr_gid) return true;
  const passwd* pw = ::getpwuid(peer.uid);
  if (!pw) return false;
  std::vector<gid_t> groups(64);
  int n = static_cast<int>(groups.size());
  gid_t want = g->gr_gid;
  if (::getgrouplist(pw->pw_name, pw->pw_gid, groups.data(), &n) < 0) {
    groups.resize(static_cast<std::size_t>(n));
    if (::getgrouplist(pw->pw_name, pw->pw_gid, groups.data(), &n) < 0) return false;
  }
  groups.resize(static_cast<std::size_t>(n));
  return std::find(groups.begin(), groups.end(), want) != groups.end();
}

void Service::tryGrant() {
  if (book_.queued() == 0) return;
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
    if (l.client.pending) fail(l.client.conn, l.client.pendingId, code::kUnavailable, why);
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
      if (l.client.pending) fail(l.client.conn, l.client.pendingId, code::kRefused, why);
      endings_.withdraw(l, why);  // frees l
      return why;
    }
    // The unit's run this lease holds: its end is told from a restart by it.
    if (!l.place.unit.empty() && env_.units) {
      if (auto run = env_.units->run(l.place.unit)) l.place.invocation = run->invocation;
    }
    sampler_.startMetering(l);
    if (l.target && l.target->pid) (void)env_.watches.watchPid(l.id, *l.target->pid);
  }
  if (l.client.pending) {
    reply(l.client.conn, l.client.pendingId, rpc::api::encode(views_.leaseReply(l)));
    l.client.pending = false;
  }
  if (l.isAttach()) l.client.conn = 0;  // an attached lease lives on without its client
  return std::nullopt;
}

void Service::onStarted(std::uint64_t conn, const Peer& peer, const json& id,
                        const rpc::api::Started& p) {
  Lease* l = owned(conn, peer, id, p.lease);
  if (!l) return;
  if (!l->isRun() || l->state() != Lease::State::Granted) {
    return fail(conn, id, code::kConflict,
                fmt::format("lease {} is not a granted run lease waiting to start", l->id));
  }
  PlacementEnv penv{env_.proc, env_.cgroupRoot, env_.units, env_.pageSize};
  if (auto denied = placeRun(penv, book_, peer, p, *l, handover_)) return deny(conn, id, *denied);
  // Armed before the workload is let go (the client holds it until this
  // reply): a lease the kernel's charge cannot cover is refused, never run blind.
  if (auto s = sampler_.arm(*l); !s) {
    l->place = Lease::Placement{};
    return deny(conn, id, Denial{code::kRefused, s.error().message});
  }
  l->markRunning(clock::realtimeNs());
  l->clientBack(conn);
  if (auto ev =
          events_.record(*l, ledger::kStarted, ledger::encode(placedRow(*l)), l->startedAtNs());
      !ev) {
    return fail(conn, id, code::kInternal,
                fmt::format("the start could not be recorded: {}", ev.error().message));
  }
  sampler_.startMetering(*l);
  reply(conn, id, rpc::api::encode(views_.leaseReply(*l)));
}

void Service::onComplete(std::uint64_t conn, const Peer& peer, const json& id,
                         rpc::api::Complete& p) {
  Lease* l = owned(conn, peer, id, p.lease);
  if (!l) return;
  if (!l->isRun())
    return fail(conn, id, code::kConflict, "only run leases are completed by their client");
  // An outcome exists only for a workload that started: a queued request or
  // a grant that never started has nothing to report (release withdraws it).
  if (l->state() != Lease::State::Running) {
    return fail(
        conn, id, code::kConflict,
        fmt::format("lease {} is {}, not running: there is no outcome to record (release it to "
                    "withdraw it)",
                    l->id,
                    l->state() == Lease::State::Queued ? "queued" : "granted but never started"));
  }
  // The daemon's record; the client's, as it sent it, inside as "client".
  json record = endings_.runOutcome(*l, p.record);
  record["daemon"] = views_.daemonSaw(*l);
  auto ev = events_.recordOutcome(*l, record, record["outcome"].value("class", "unknown"));
  if (!ev)
    return fail(conn, id, ev.error().code == EEXIST ? code::kConflict : code::kInternal,
                ev.error().message);
  // The kernel's figures as the record just took them from the lease's meter.
  rpc::api::CompleteReply done{l->id, ev->seq, ev->hash, std::nullopt};
  if (l->metering.meter) done.kernelCharge = l->metering.meter->gpu().kernel;
  json r = rpc::api::encode(done);
  std::string leaseId = l->id;
  env_.watches.unwatch(leaseId);
  book_.forget(leaseId);
  reply(conn, id, r);
  tryGrant();
}

void Service::onResume(std::uint64_t conn, const Peer& peer, const json& id,
                       const std::string& lease) {
  Lease* l = owned(conn, peer, id, lease);
  if (!l) return;
  if (!l->isRun())
    return fail(conn, id, code::kConflict, "only run leases have a client to resume");
  if (l->state() == Lease::State::Queued)
    return fail(conn, id, code::kConflict,
                fmt::format("lease {} is still queued; there is nothing to resume", l->id));
  l->clientBack(conn);
  reply(conn, id, rpc::api::encode(views_.leaseReply(*l)));
}

void Service::onRelease(std::uint64_t conn, const Peer& peer, const json& reqId,
                        const std::string& lease, bool cancelOnly) {
  Lease* l = owned(conn, peer, reqId, lease);
  if (!l) return;
  std::string id = l->id;
  if (l->state() == Lease::State::Queued) {
    fail(l->client.conn, l->client.pendingId, code::kCancelled,
         fmt::format("request {} was cancelled by uid {}", id, peer.uid));
    if (l->client.conn != conn)
      reply(conn, reqId, rpc::api::encode(rpc::api::ReleaseReply{id, "cancelled"}));
    book_.forget(id);
    tryGrant();
    return;
  }
  if (cancelOnly)
    return fail(conn, reqId, code::kConflict,
                fmt::format("lease {} is no longer queued; use release", id));
  // Asked already: its stop is under way; a second release writes nothing.
  if (l->ending.releaseRequested)
    return reply(conn, reqId, rpc::api::encode(rpc::api::ReleaseReply{id, "stopping"}));
  // Acknowledge only what is on disk: a release the ledger cannot record
  // changes nothing (a restarted daemon would re-adopt the lease and bound it).
  if (auto ev = events_.record(*l, ledger::kReleased,
                               ledger::encode(ledger::ReleasedRow{peer.uid, peer.pid}));
      !ev) {
    return fail(conn, reqId, code::kUnavailable,
                fmt::format("lease {} is not released: the ledger could not record the release "
                            "({}). The lease is unchanged and still bounded; release it again "
                            "once the ledger writes (tally daemon's journal says when)",
                            id, ev.error().message));
  }
  if (l->state() == Lease::State::Granted) {
    endings_.withdraw(*l, fmt::format("released by uid {} before it started", peer.uid));
    return reply(conn, reqId, rpc::api::encode(rpc::api::ReleaseReply{id, "withdrawn"}));
  }
  if (l->isAttach()) {
    endings_.finishAttached(*l, true);
    return reply(conn, reqId, rpc::api::encode(rpc::api::ReleaseReply{id, "released"}));
  }
  // A running run lease: its workload is stopped; the client reports the outcome.
  l->ending.releaseRequested = true;
  endings_.requestStop(*l);
  if (!l->client.conn) l->awaitClient(clock::monotonicUs(), cfg_.daemon.clientGraceUs);
  reply(conn, reqId, rpc::api::encode(rpc::api::ReleaseReply{id, "stopping"}));
}

void Service::onBound(std::uint64_t conn, const Peer& peer, const json& id,
                      const rpc::api::Bound& p) {
  Lease* l = owned(conn, peer, id, p.lease);
  if (!l) return;
  if (!l->isRun() || l->state() != Lease::State::Running) {
    return fail(conn, id, code::kConflict,
                fmt::format("lease {} is not a running run lease; only its client reports GPU "
                            "bound events, while it runs",
                            l->id));
  }
  if (auto s = events_.clientBound(*l, p.event, env_.limits); !s)
    return fail(conn, id, code::kRateLimited, s.error().message);
  reply(conn, id, rpc::api::encode(rpc::api::BoundReply{true}));
}

void Service::onExited(std::uint64_t conn, const Peer& peer, const json& id,
                       const rpc::api::Exited& p) {
  Lease* l = owned(conn, peer, id, p.lease);
  if (!l) return;
  if (!l->isAttach() || l->state() != Lease::State::Running) {
    return fail(conn, id, code::kConflict,
                fmt::format("lease {} is not a running attach lease; a run lease's client "
                            "reports its wait status in complete",
                            l->id));
  }
  l->ending.reported =
      p.exitCode ? lease::Ending{lease::Ending::Kind::Exited, *p.exitCode, 0, 0}
                 : lease::Ending{lease::Ending::Kind::Signaled, 0, p.signal.value_or(0), 0};
  reply(conn, id, rpc::api::encode(rpc::api::BoundReply{true}));
  // Its cgroup emptied before the word came: it ends now, with it.
  cgroupChanged(p.lease);
}

// The kernel's counters and refusals as of now, not the last sample: the
// Slurm plugin asks as a step's tasks end, for the step and (`live`) its job.
void Service::onLeaseQuery(std::uint64_t conn, const json& id, const rpc::api::LeaseQuery& p) {
  Lease* l = book_.find(p.lease);
  Lease* parent = p.live && l && !l->parent.empty() ? book_.find(l->parent) : nullptr;
  if (l) sampler_.refreshCharge(*l, parent);
  json r = p.live && l ? views_.liveLease(*l, parent) : views_.leaseWithRows(p.lease);
  if (r.is_null())
    return fail(conn, id, code::kNotFound,
                fmt::format("no lease {} (live or in the ledger)", p.lease));
  reply(conn, id, r);
}

bool Service::connectionInUse(std::uint64_t conn) const {
  return events_.subscribed(conn) || book_.holdsConnection(conn);
}

void Service::cgroupChanged(const std::string& leaseId) {
  Lease* l = book_.find(leaseId);
  if (!l || l->state() != Lease::State::Running) return;
  bool populated = Endings::populated(*l);
  if (l->isAttach()) endings_.noteCounters(*l, !populated);
  if (populated) return;
  if (l->isAttach()) {
    // Its attacher said it reports how the processes ended: the outcome
    // waits for that word (onExited), or for the deadline (tick).
    if (l->ending.awaitsReport && !l->ending.reported) {
      std::uint64_t now = env_.monotonicUs ? env_.monotonicUs() : clock::monotonicUs();
      if (!l->ending.reportDeadlineUs) {
        l->ending.reportDeadlineUs = now + rpc::api::kExitReportWaitUs;
        awaitingReport_.insert(l->id);
      }
      if (now < l->ending.reportDeadlineUs) return;
    }
    std::string unit = l->place.unit;
    endAttached(*l);  // frees l
    if (const config::DeclaredLease* d = declarationOf(unit)) leaseDeclared(*d);
    return;
  }
  // A run lease's workload ended: its client reports the outcome; without a
  // client the lease is lost after the grace.
  if (!l->client.conn && !l->client.graceDeadlineUs)
    l->awaitClient(clock::monotonicUs(), cfg_.daemon.clientGraceUs);
}

Lease* Service::leaseOfUnit(const std::string& unit) {
  for (const auto& [id, l] : book_.all()) {
    if (l->isAttach() && (l->place.unit == unit || (l->target && l->target->unit == unit)))
      return l.get();
  }
  return nullptr;
}

const config::DeclaredLease* Service::declarationOf(const std::string& unit) const {
  if (unit.empty()) return nullptr;
  for (const auto& d : cfg_.leases) {
    if (d.unit() == unit) return &d;
  }
  return nullptr;
}

void Service::endAttached(Lease& l) {
  std::optional<std::string> words;
  const std::string unit = l.place.unit;
  if (!unit.empty() && env_.units) {
    if (auto run = env_.units->run(unit)) {
      RunEnding e = runEnding(unit, l.place.invocation, *run);
      if (const config::DeclaredLease* d = declarationOf(unit)) {
        words =
            e.words +
            (e.restart ? "; its next run is leased again" : "; leased again when it next starts") +
            fmt::format(" ([leases.{}])", d->name);
      } else if (e.restart) {
        words = e.words + fmt::format(
                              "; its next run is not leased: tally attach --unit {} again, or "
                              "declare it in [leases.NAME] to lease every run",
                              unit);
      } else {
        words = e.words;
      }
    }
  }
  endings_.finishAttached(l, false, std::move(words));
}

void Service::unitChanged(const std::string& unit) {
  if (!env_.units) return;
  if (Lease* l = leaseOfUnit(unit)) {
    // The lease's cgroup (held open) still has processes: its run goes on.
    if (l->state() != Lease::State::Running || Endings::populated(*l)) return;
    endAttached(*l);  // frees l
  }
  if (const config::DeclaredLease* d = declarationOf(unit)) leaseDeclared(*d);
}

void Service::leaseDeclared(const config::DeclaredLease& d) {
  if (!env_.units || leaseOfUnit(d.unit())) return;
  DeclaredRun& st = declared_[d.unit()];
  auto run = env_.units->run(d.unit());
  if (!run) return noteDeclared(d, st, run.error().message);
  if (!runLeasable(*run)) {
    st.waitsForRoom = false;  // not running: leased when systemd says it started
    return;
  }
  // One lease per run: a run whose lease ended (released, or refused past
  // admission) is not leased again; its next run is.
  if (!run->invocation.empty() &&
      (run->invocation == st.leasedInvocation || run->invocation == st.refusedInvocation))
    return;
  auto a = admit(0, Peer{0, 0, 0}, json(), d.attach.declared, &d.attach);
  if (a.denial) {
    st.waitsForRoom = a.wouldWait;
    if (!a.wouldWait) st.refusedInvocation = run->invocation;
    return noteDeclared(d, st, a.denial->message);
  }
  st = DeclaredRun{};
  st.leasedInvocation = run->invocation;
}

void Service::noteDeclared(const config::DeclaredLease& d, DeclaredRun& st,
                           const std::string& why) {
  if (st.refusedWhy == why) return;  // said once per distinct reason, not every retry
  st.refusedWhy = why;
  events_.note(LOG_WARNING,
               fmt::format("[leases.{}] {} runs unleased (unmetered, unbounded): {}{}", d.name,
                           d.unit(), why, st.waitsForRoom ? "; tried again as room frees" : ""),
               {{"TALLY_DECLARED", d.name}, {"TALLY_UNIT", d.unit()}});
}

std::vector<std::string> Service::startDeclared() {
  std::vector<std::string> log;
  for (const auto& d : cfg_.leases) {
    if (!env_.units) {
      log.push_back(fmt::format("[leases.{}] {}: not followed: no systemd manager is reachable",
                                d.name, d.unit()));
      continue;
    }
    if (auto s = env_.units->watchUnit(d.unit()); !s) {
      log.push_back(
          fmt::format("[leases.{}] {}: not followed: {}", d.name, d.unit(), s.error().message));
      continue;
    }
    leaseDeclared(d);
    if (const Lease* l = leaseOfUnit(d.unit())) {
      log.push_back(fmt::format("[leases.{}] {}: leased ({})", d.name, d.unit(), l->id));
    } else if (auto it = declared_.find(d.unit());
               it != declared_.end() && !it->second.refusedWhy.empty()) {
      log.push_back(fmt::format("[leases.{}] {}: runs unleased: {}", d.name, d.unit(),
                                it->second.refusedWhy));
    } else {
      log.push_back(
          fmt::format("[leases.{}] {}: not running; leased when it starts", d.name, d.unit()));
    }
  }
  return log;
}

void Service::disconnected(std::uint64_t conn) {
  events_.unsubscribe(conn);
  std::vector<std::string> ids;
  for (const auto& [id, l] : book_.all()) {
    if (l->client.conn == conn) ids.push_back(id);
  }
  for (const auto& id : ids) {
    Lease* l = book_.find(id);
    if (!l) continue;
    if (l->state() == Lease::State::Queued) {
      book_.forget(id);  // the waiter went away: its request goes with it
      continue;
    }
    l->client.conn = 0;
    l->client.pending = false;
    // A run lease's client may come back (resume); until the grace ends the lease stays.
    if (l->isRun()) l->awaitClient(clock::monotonicUs(), cfg_.daemon.clientGraceUs);
  }
  book_.connectionGone(conn);
  if (!ids.empty()) tryGrant();
}

void Service::tick() {
  events_.ledgerHealth();
  std::uint64_t now = clock::monotonicUs();
  bool changed = false;
  for (const auto& id : book_.expire(now)) {
    changed = true;
    Lease* l = book_.find(id);
    if (!l) continue;
    fail(l->client.conn, l->client.pendingId, code::kTimeout,
         fmt::format("no grant within the queue timeout (position {} of {})",
                     l->client.lastPosition.value_or(0), book_.queued() + 1));
    book_.forget(id);
  }
  endings_.expireStops(now);
  endings_.expireGraces(now);
  // An attach lease whose attacher promised an exit report that never came
  // ends without it at its deadline.
  // Only those that wait are looked at, not every lease at every tick.
  std::vector<std::string> unreported;
  std::uint64_t reportNow = env_.monotonicUs ? env_.monotonicUs() : now;
  for (auto it = awaitingReport_.begin(); it != awaitingReport_.end();) {
    const Lease* l = book_.find(*it);
    if (!l || !l->ending.reportDeadlineUs) {
      it = awaitingReport_.erase(it);  // ended meanwhile (its word came, or it was released)
    } else if (reportNow >= l->ending.reportDeadlineUs) {
      unreported.push_back(*it);
      it = awaitingReport_.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& lid : unreported) {
    if (Lease* l = book_.find(lid)) l->ending.awaitsReport = false;
    cgroupChanged(lid);
  }
  // Grants happen when something is released; the tick only retries the
  // requests that wait on measured headroom, which changes by itself.
  if (changed || book_.waitsOnMeasuredHeadroom()) tryGrant();
  // A declared unit that runs unleased for want of room is tried again once
  // a second (admission only: its unit's state comes from systemd's signals).
  if (now - lastDeclaredPassUs_ >= 1'000'000) {
    lastDeclaredPassUs_ = now;
    for (const auto& d : cfg_.leases) {
      if (auto it = declared_.find(d.unit()); it != declared_.end() && it->second.waitsForRoom)
        leaseDeclared(d);
    }
  }
  // A waiter told nothing for a while hears again what it waits for (a pass
  // over the queue, so once a second, not every tick).
  std::uint64_t every = env_.limits.queueStatusEveryUs;
  if (book_.queued() && now - lastStatusPassUs_ >= std::min<std::uint64_t>(every, 1'000'000)) {
    lastStatusPassUs_ = now;
    events_.positions(book_.due(now, every, headroom()));
  }
}

std::uint64_t Service::tickIntervalUs() const {
  if (book_.queued() || !awaitingReport_.empty()) return kBusyTickUs;
  for (const auto& [id, l] : book_.all())
    if (l->ending.killDeadlineUs || l->client.graceDeadlineUs) return kBusyTickUs;
  return kIdleTickUs;
}

void Service::sample() {
  for (const auto& id : sampler_.sample()) cgroupChanged(id);
  if (env_.kernelCharge && upkeep_.tick(sampler_.now(), clock::realtimeNs())) residueChanged();
  events_.ledgerHealth();
}

void Service::residueChanged() {
  bool changed = false;
  for (const auto& p : cfg_.pools)
    changed = book_.setGpuResidue(p.name, upkeep_.poolResidue(p.name)) || changed;
  if (changed) tryGrant();
}

void Service::prune() {
  const auto& c = cfg_.daemon;
  auto r = ledger_.pruneSamples(clock::realtimeNs(), c.samplesFullResolutionUs * 1000,
                                c.samplesMaxAgeUs * 1000, c.samplesMaxRows);
  if (!r) fmt::print(stderr, "tally daemon: sample retention: {}\n", r.error().message);
}

Result<std::vector<std::string>> Service::recover() {
  auto lines = Recovery(cfg_.daemon, RecoveryEnv{env_.cgroupRoot, env_.watches, env_.units},
                        ledger_, book_, events_, endings_, sampler_, handover_)
                   .run();
  if (lines) {
    // Re-adopted empty, awaiting its attacher's exit report: the report's
    // deadline starts now (cgroupChanged), as if the daemon had seen it empty.
    std::vector<std::string> emptied;
    for (const auto& [id, l] : book_.all())
      if (l->isAttach() && l->state() == Lease::State::Running && l->ending.awaitsReport &&
          !Endings::populated(*l))
        emptied.push_back(id);
    for (const auto& id : emptied) cgroupChanged(id);
  }
  if (lines && env_.kernelCharge) {
    // The kernel kept every lease's charge across the restart; those no
    // re-adopted lease claims (it ended while no daemon ran) are retired, and
    // ended leases whose buffers live on are named again.
    std::vector<std::uint64_t> claimed;
    for (const auto& [id, l] : book_.all())
      if (l->metering.kernelArmed) claimed.push_back(l->metering.kernelArmed);
    upkeep_.recover(claimed);
    residueChanged();
  }
  return lines;
}

void Service::setCoverage(const coverage::Assessment& a) {
  handover_.coverage = a.verdict.coverage;
  handover_.statNamesGpu = a.signs.statNamesGpu;
  coverageKernel_ = a.kernel;
  events_.coverageAtStart(a, handover_);
}

}  // namespace tally::daemon
