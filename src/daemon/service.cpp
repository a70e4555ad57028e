#include "daemon/service.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <syslog.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <set>

#include "daemon/lease_rows.h"
#include "daemon/recovery.h"
#include "lease/outcome.h"
#include "lease/spec.h"
#include "ledger/rows.h"
#include "rpc/messages.h"
#include "util/clean_text.h"
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
      sampler_(
          cfg_.daemon,
          SamplerEnv{env.proc, env.sys, env.cgroupRoot, env.watches, env.units, env.monotonicUs,
                     env.kernelCharge, env.limits.maxCgroupsWalkedPerUid, env.treeWatcher},
          ledger, book_, events_, host_, handover_),
      endings_(cfg_.daemon, EndingsEnv{env.cgroupRoot, env.watches, env.units}, ledger, book_,
               events_, [this] { tryGrant(); }),
      views_(cfg_, ledger, book_, measures_, host_, events_, handover_, coverageKernel_, env_.build,
             env_.cannotContain) {
  events_.rowBudget() =
      RowBudget(env.limits.ledgerRowsPerMinutePerUid, env.limits.ledgerBytesPerMinutePerUid);
  access_ = resolveAccess(cfg_, env.names ? *env.names : systemLookup());
  queries_ = QueryBudget(env.limits.queriesPerSecondPerUid, env.limits.queryTimePerSecondPerUidUs);
  for (const auto& name : access_.unresolved)
    events_.note(LOG_WARNING,
                 fmt::format("{}: it admits nobody until the daemon restarts with it "
                             "resolvable",
                             name),
                 {});
  endings_.beforeRecord([this](Lease& l) { sampler_.finalRefusals(l); });
  views_.setKernelUpkeep(&upkeep_);
  // A lease that ends leaves the kernel's charge: its record has the final
  // figures by then; buffers it made that outlive it stay counted (in its
  // parent's charge, against its pools) until freed.
  if (env.kernelCharge) {
    book_.onForget([this](const Lease& l) {
      const Lease* parent = l.parent.empty() ? nullptr : book_.find(l.parent);
      upkeep_.retire(l, parent ? parent->metering().kernelArmed : 0);
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

void Service::handle(std::uint64_t conn, const Peer& peer, const rpc::Request& req) {
  using rpc::api::Method;
  auto m = rpc::api::parseMethod(req.method);
  if (!m) {
    return fail(
        conn, req.id, code::kUnknownMethod,
        fmt::format("unknown method '{}' ({})", text::truncateUtf8(text::trim(req.method), 64),
                    rpc::api::methodList()));
  }
  // A read whose cost grows with the box or a lease's history is budgeted
  // per user (daemon/query_budget.h); a refusal costs a reply.
  bool costly = *m == Method::Lease || *m == Method::Leases || *m == Method::Pools ||
                *m == Method::Seats || *m == Method::Overview || *m == Method::Metrics;
  if (costly) {
    switch (queries_.take(peer.uid, clock::monotonicUs())) {
      case QueryBudget::Refusal::None:
        break;
      case QueryBudget::Refusal::Count:
        return fail(conn, req.id, code::kRateLimited,
                    fmt::format("uid {} asks for listings, metrics and lease histories faster "
                                "than {} a second (queries_per_second_per_uid); ask again in a "
                                "second",
                                peer.uid, queries_.perSecond()));
      case QueryBudget::Refusal::Time:
        return fail(conn, req.id, code::kRateLimited,
                    fmt::format("uid {}'s listings, metrics and lease histories took more than "
                                "{} ms of the daemon's time a second "
                                "(query_time_per_second_per_uid); ask again in {} ms",
                                peer.uid, queries_.timeUsPerSecond() / 1000,
                                (queries_.timeWaitUs(peer.uid) + 999) / 1000));
    }
  }
  // What it costs the loop is charged when it has run (a scope's end: every
  // case below returns).
  struct ChargeOnReturn {
    QueryBudget& budget;
    uid_t uid;
    std::uint64_t startUs;
    ~ChargeOnReturn() {
      std::uint64_t now = clock::monotonicUs();
      budget.charge(uid, now - startUs, now);
    }
  };
  std::optional<ChargeOnReturn> charge;
  if (costly) charge.emplace(ChargeOnReturn{queries_, peer.uid, clock::monotonicUs()});
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
      return with(rpc::api::decodeLeaseRef(params), [&](auto& p) {
        onRelease(conn, peer, id, p.lease, *m == Method::Cancel, p.containmentRefused);
      });
    case Method::Lease:
      return with(rpc::api::decodeLeaseQuery(params), [&](auto& p) { onLeaseQuery(conn, id, p); });
    case Method::Reload:
      return with(rpc::api::decodeEmpty(params), [&](auto&) {
        if (peer.uid != 0 && peer.uid != ::geteuid())
          return fail(conn, id, code::kForbidden,
                      "only root (or the daemon's own user) reloads the daemon's config: sudo "
                      "tally daemon reload");
        auto r = reload();
        if (!r) return fail(conn, id, code::kRefused, r.error().message);
        reply(conn, id, rpc::api::encode(rpc::api::ReloadReply{std::move(*r)}));
      });
    case Method::Hello:
      return with(rpc::api::decodeEmpty(params), [&](auto&) {
        reply(conn, id,
              rpc::api::encode(rpc::api::HelloReply{rpc::kProtocolVersion, ::getpid(), peer.uid,
                                                    cfg_.daemon.stateDir}));
      });
    case Method::Subscribe:
      return with(rpc::api::decodeSubscribe(params), [&](auto& p) {
        // The reply, then the ledger's rows since then in slices across
        // turns (backgroundWork), then the live events: in that order.
        if (auto s = events_.follow(conn, id, p, peer.uid, env_.limits.maxReplaysPerUid); !s) {
          int c = s.error().code;
          return fail(conn, id,
                      c == EBUSY    ? code::kBusy
                      : c == EEXIST ? code::kConflict
                                    : code::kInternal,
                      c == EBUSY || c == EEXIST
                          ? s.error().message
                          : fmt::format("cannot read the ledger to replay: {}", s.error().message));
        }
        bool replaying = p.sinceNs || p.afterSeq;
        reply(conn, id,
              rpc::api::encode(
                  rpc::api::SubscribeReply{{"lease", "gpu-bound", "coverage"}, replaying}));
        if (replaying) env_.outbox.wantTurn();
      });
    case Method::Leases:
      return with(rpc::api::decodeListPage(params),
                  [&](auto& p) { reply(conn, id, views_.leasesReply(p)); });
    case Method::Seats:
      return with(rpc::api::decodeListPage(params),
                  [&](auto& p) { reply(conn, id, views_.seatsReply(p, clock::realtimeNs())); });
    case Method::Pools:
    case Method::Overview:
    case Method::Metrics:
      return with(rpc::api::decodeEmpty(params),
                  [&](auto&) { reply(conn, id, views_.answer(*m, clock::realtimeNs())); });
  }
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
  if (auto denied = placeRun(penv, book_, peer, p, *l)) return deny(conn, id, *denied);
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
  // A run lease may be a parent too: its children end first (their rows
  // before its outcome), as every ending's do (Endings::end).
  endings_.endChildren(*l);
  // The daemon's record; the client's, as it sent it, inside as "client".
  json record = endings_.runOutcome(*l, p.record);
  record["daemon"] = views_.daemonSaw(*l);
  auto ev = events_.recordOutcome(*l, record, record["outcome"].value("class", "unknown"));
  if (!ev)
    return fail(conn, id, ev.error().code == EEXIST ? code::kConflict : code::kInternal,
                ev.error().message);
  // The kernel's figures as the record just took them from the lease's meter.
  rpc::api::CompleteReply done{l->id, ev->seq, ev->hash, std::nullopt};
  if (l->metering().meter) done.kernelCharge = l->metering().meter->gpu().kernel;
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
                        const std::string& lease, bool cancelOnly,
                        const std::optional<std::string>& containmentRefused) {
  Lease* l = owned(conn, peer, reqId, lease);
  if (!l) return;
  std::string id = l->id;
  if (l->state() == Lease::State::Queued) {
    std::string why = fmt::format("request {} was cancelled by uid {}", id, peer.uid);
    events_.leftQueue(*l, rpc::api::kCancelledKind, why);
    fail(l->client().conn, l->client().pendingId, code::kCancelled, why);
    if (l->client().conn != conn)
      reply(conn, reqId, rpc::api::encode(rpc::api::ReleaseReply{id, "cancelled"}));
    book_.forget(id);
    tryGrant();
    return;
  }
  if (cancelOnly)
    return fail(conn, reqId, code::kConflict,
                fmt::format("lease {} is no longer queued; use release", id));
  // A run lease's client could not contain its workload: that is how the
  // lease ended (counted, alerted on), not a release by its user, so no
  // released row is written for it.
  if (containmentRefused && l->isRun() && l->state() == Lease::State::Granted) {
    endings_.withdraw(*l,
                      fmt::format("containment refused: {}",
                                  text::truncateUtf8(text::printable(*containmentRefused), 1024)),
                      lease::outcomeClassName(lease::OutcomeClass::ContainmentRefused));
    return reply(conn, reqId, rpc::api::encode(rpc::api::ReleaseReply{id, "withdrawn"}));
  }
  // Asked already: its stop is under way; a second release writes nothing.
  if (l->ending().releaseRequested)
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
  l->releaseAsked();
  endings_.requestStop(*l);
  if (!l->client().conn) l->awaitClient(clock::monotonicUs(), cfg_.daemon.clientGraceUs);
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
  l->reportedEnding(p.exitCode
                        ? lease::Ending{lease::Ending::Kind::Exited, *p.exitCode, 0, 0}
                        : lease::Ending{lease::Ending::Kind::Signaled, 0, p.signal.value_or(0), 0});
  reply(conn, id, rpc::api::encode(rpc::api::BoundReply{true}));
  // Its cgroup emptied before the word came: it ends now, with it.
  cgroupChanged(p.lease);
}

// The kernel's counters and refusals as of now, not the last sample: the
// Slurm plugin asks as a step's tasks end, for the step and (`live`) its job.
bool Service::connectionInUse(std::uint64_t conn) const {
  return events_.subscribed(conn) || book_.holdsConnection(conn);
}

void Service::cgroupChanged(const std::string& leaseId) {
  Lease* l = book_.find(leaseId);
  if (!l || l->state() != Lease::State::Running) return;
  bool over = Endings::over(*l);
  if (l->isAttach()) endings_.noteCounters(*l, over);
  if (!over) return;
  if (l->isAttach()) {
    // Its attacher said it reports how the processes ended: the outcome
    // waits for that word (onExited), or for the deadline (tick).
    if (l->ending().awaitsReport && !l->ending().reported) {
      std::uint64_t now = env_.monotonicUs ? env_.monotonicUs() : clock::monotonicUs();
      if (!l->ending().reportDeadlineUs) {
        l->awaitReportUntil(now + rpc::api::kExitReportWaitUs);
        awaitingReport_.insert(l->id);
      }
      if (now < l->ending().reportDeadlineUs) return;
    }
    std::string unit = l->place.unit;
    endAttached(*l);  // frees l
    if (const config::DeclaredLease* d = declarationOf(unit)) leaseDeclared(*d);
    return;
  }
  // A run lease's workload ended: its client reports the outcome; without a
  // client the lease is lost after the grace.
  if (!l->client().conn && !l->client().graceDeadlineUs)
    l->awaitClient(clock::monotonicUs(), cfg_.daemon.clientGraceUs);
}

void Service::disconnected(std::uint64_t conn) {
  events_.unsubscribe(conn);
  std::vector<std::string> ids;
  for (const auto& [id, l] : book_.all()) {
    if (l->client().conn == conn) ids.push_back(id);
  }
  for (const auto& id : ids) {
    Lease* l = book_.find(id);
    if (!l) continue;
    if (l->state() == Lease::State::Queued) {
      // The waiter went away (Ctrl-C, a client that gave up): its request
      // goes with it, and that is how it left the queue.
      events_.leftQueue(*l, rpc::api::kCancelledKind, "its client went away while it waited");
      book_.forget(id);
      continue;
    }
    l->clientGone();
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
    std::string why = fmt::format("no grant within the queue timeout (position {} of {})",
                                  l->client().lastPosition.value_or(0), book_.queued() + 1);
    events_.leftQueue(*l, rpc::api::kQueueTimeoutKind, why);
    fail(l->client().conn, l->client().pendingId, code::kTimeout, why);
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
    if (!l || !l->ending().reportDeadlineUs) {
      it = awaitingReport_.erase(it);  // ended meanwhile (its word came, or it was released)
    } else if (reportNow >= l->ending().reportDeadlineUs) {
      unreported.push_back(*it);
      it = awaitingReport_.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& lid : unreported) {
    if (Lease* l = book_.find(lid)) l->expectReport(false);
    cgroupChanged(lid);
  }
  // Grants happen when something is released; the tick only retries the
  // requests that wait on measured headroom, which changes by itself.
  if (changed || book_.waitsOnMeasuredHeadroom()) tryGrant();
  retryDeclared(now);
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
    if (l->ending().killDeadlineUs || l->client().graceDeadlineUs) return kBusyTickUs;
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
  if (!r) events_.note(LOG_WARNING, fmt::format("sample retention: {}", r.error().message));
}

Result<std::vector<std::string>> Service::recover() {
  auto lines = Recovery(cfg_.daemon, RecoveryEnv{env_.cgroupRoot, env_.watches, env_.units},
                        ledger_, book_, events_, endings_, sampler_)
                   .run();
  if (lines) {
    // Re-adopted empty, awaiting its attacher's exit report: the report's
    // deadline starts now (cgroupChanged), as if the daemon had seen it empty.
    std::vector<std::string> emptied;
    for (const auto& [id, l] : book_.all())
      if (l->isAttach() && l->state() == Lease::State::Running && l->ending().awaitsReport &&
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
      if (l->metering().kernelArmed) claimed.push_back(l->metering().kernelArmed);
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
