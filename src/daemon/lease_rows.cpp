#include "daemon/lease_rows.h"

#include <fmt/format.h>

#include "lease/spec.h"
#include "util/clock.h"

namespace tally::daemon {

using json = nlohmann::json;

void setBound(Lease& l, const enforce::GpuBound& declared, const coverage::Handover& handover) {
  l.metering.bound = declared;
  l.metering.advisory = handover.gpuBoundAdvisory(declared.max.has_value());
  l.metering.bound.action = lease::enforcedAction(declared.action, l.metering.advisory);
}

std::unique_ptr<Lease> newLease(lease::LeaseKind kind, uid_t owner, pid_t peerPid,
                                std::uint64_t conn, const rpc::api::Declared& d,
                                const config::Daemon& cfg, const Limits& limits,
                                const coverage::Handover& handover) {
  auto l = std::make_unique<Lease>();
  l->id = lease::newLeaseId();
  l->kind = kind;
  l->owner = owner;
  l->peerPid = peerPid;
  l->client.conn = conn;
  l->requestedAtNs = clock::realtimeNs();
  l->req.id = l->id;
  l->req.pools = d.pools;
  l->req.declaration = d.declaration;
  if (l->req.declaration.name.empty()) l->req.declaration.name = lease::kindName(kind);
  l->req.priority = d.priority;
  std::uint64_t waitUs = d.timeoutUs.value_or(cfg.queueTimeoutUs);
  if (waitUs) l->req.deadlineUs = clock::monotonicUs() + waitUs;
  setBound(*l, lease::gpuBound(d.declaration, cfg.sampleIntervalUs, false), handover);
  l->metering.boundReports = TokenBucket(limits.boundBurst, limits.boundRefillUs);
  return l;
}

ledger::GrantedRow grantedRow(const Lease& l) {
  ledger::GrantedRow row;
  row.kind = l.kind;
  row.owner = l.owner;
  row.peerPid = l.peerPid;
  row.pools = l.req.pools;
  row.priority = l.req.priority;
  row.declaration = l.req.declaration;
  row.reportsExit = l.ending.awaitsReport;
  row.parent = l.parent;
  if (l.metering.bound.any()) {
    row.boundAction = l.metering.bound.action;
    row.boundConsecutive = l.metering.bound.consecutive;
  }
  row.requestedAtNs = l.requestedAtNs;
  if (l.target) row.target = *l.target;
  return row;
}

ledger::CoverageRow coverageRow(const coverage::Assessment& a, const coverage::Handover& handover,
                                const std::optional<ledger::CoverageRow>& last) {
  ledger::CoverageRow row;
  row.kernel = a.kernel;
  row.coverage = coverage::coverageName(a.verdict.coverage);
  row.basis = a.verdict.basis;
  row.verdict = a.verdict.line;
  row.staticSigns = coverage::signsJson(a.signs);
  row.activeProbe = a.probe ? json(coverage::probeJson(*a.probe)) : json(nullptr);
  row.keepGpuMemoryMax = handover.keepGpuMemoryMax;
  row.tallyDoes = handover.whatTallyDoes();
  if (last && (last->coverage != row.coverage || last->kernel != a.kernel))
    row.changedFrom = std::make_pair(last->kernel, last->coverage);
  return row;
}

ledger::PlacedRow placedRow(const Lease& l) {
  return {l.place.unit,
          l.place.cgroup,
          l.place.inode,
          l.place.countersCgroup,
          l.place.oomKillsAtAdoption,
          l.place.applied ? std::optional<probes::MemoryLimit>(l.place.applied->memoryMax)
                          : std::nullopt};
}

// The lease its granted row describes, with what later rows add.
Result<std::unique_ptr<Lease>> rebuildLease(const std::vector<ledger::Event>& events,
                                            const config::Daemon& cfg,
                                            const coverage::Handover& handover,
                                            std::optional<ledger::PlacedRow>& placed) {
  auto l = std::make_unique<Lease>();
  l->id = events.front().leaseId;
  std::uint64_t grantedNs = 0, startedNs = 0;
  for (const auto& e : events) {
    json body = json::parse(e.body, nullptr, false);
    if (e.kind == ledger::kGranted) {
      auto g = ledger::decodeGranted(body);
      if (!g) return Error{0, fmt::format("lease {}: {}", l->id, g.error().message)};
      l->kind = g->kind;
      l->owner = g->owner;
      l->peerPid = g->peerPid;
      grantedNs = e.atNs;
      l->requestedAtNs = g->requestedAtNs;
      l->req.id = l->id;
      l->req.pools = g->pools;
      l->req.priority = g->priority;
      l->req.declaration = g->declaration;
      // The bound as it was enforced before the restart (a child's may be
      // its parent's), made advisory again or not by this start's hand-over.
      enforce::GpuBound bound = lease::gpuBound(g->declaration, cfg.sampleIntervalUs, false);
      if (g->boundAction) {
        bound.action = *g->boundAction;
        bound.consecutive = g->boundConsecutive;
      }
      setBound(*l, bound, handover);
      l->parent = g->parent;
      l->ending.awaitsReport = g->reportsExit;
      if (!g->target.empty()) l->target = std::make_unique<lease::AttachTarget>(g->target);
    } else if (e.kind == ledger::kStarted || e.kind == ledger::kAdopted) {
      auto p = ledger::decodePlaced(body);
      if (!p) return Error{0, fmt::format("lease {}: {}", l->id, p.error().message)};
      placed = *p;
      startedNs = e.atNs;
      if (p->oomKillsAtAdoption) l->place.oomKillsAtAdoption = p->oomKillsAtAdoption;
    } else if (e.kind == ledger::kReleased) {
      l->ending.releaseRequested = true;
    } else if (e.kind == ledger::kGpuBound) {
      auto b = ledger::decodeBound(body);
      if (!b) return Error{0, fmt::format("lease {}: {}", l->id, b.error().message)};
      if (b->event.kind == enforce::Verdict::Kill) {
        // Killed before the restart: the outcome still names it, and it is not killed twice.
        l->ending.tallyKill = b->event.summary;
        l->metering.boundState.acted = true;
      }
    }
  }
  l->markRecovered(placed ? Lease::State::Running : Lease::State::Granted, grantedNs, startedNs);
  return l;
}

}  // namespace tally::daemon
