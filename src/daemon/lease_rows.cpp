#include "daemon/lease_rows.h"

#include <fmt/format.h>

#include "lease/spec.h"
#include "util/clock.h"

namespace tally::daemon {

using json = nlohmann::json;

std::unique_ptr<Lease> newLease(lease::LeaseKind kind, uid_t owner, pid_t peerPid,
                                std::uint64_t conn, const rpc::api::Declared& d,
                                const config::Daemon& cfg, const enforce::KernelState& kernel) {
  auto l = std::make_unique<Lease>();
  l->id = lease::newLeaseId();
  l->kind = kind;
  l->owner = owner;
  l->peerPid = peerPid;
  l->clientBack(conn);
  l->requestedAtNs = clock::realtimeNs();
  l->req.id = l->id;
  l->req.owner = owner;
  l->req.pools = d.pools;
  l->req.declaration = d.declaration;
  if (l->req.declaration.name.empty()) l->req.declaration.name = lease::kindName(kind);
  l->req.priority = d.priority;
  l->req.placed = d.placed;
  std::uint64_t waitUs = d.timeoutUs.value_or(cfg.queueTimeoutUs);
  if (waitUs) l->req.deadlineUs = clock::monotonicUs() + waitUs;
  l->planFor(kernel, cfg.sampleIntervalUs);
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
  row.reportsExit = l.ending().awaitsReport;
  row.keepWhenEmpty = l.ending().keptWhenEmpty;
  row.parent = l.parent;
  // The bound as planned, for a reader of the ledger (a restart plans it again).
  if (l.plan().bound.any()) {
    row.boundAction = l.plan().bound.action;
    row.boundConsecutive = l.plan().bound.consecutive;
  }
  row.requestedAtNs = l.requestedAtNs;
  if (l.target) row.target = *l.target;
  row.placed = l.req.placed;
  row.shortfall = l.shortfall;
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
                                            const enforce::KernelState& kernel,
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
      l->req.owner = g->owner;
      l->req.pools = g->pools;
      l->req.priority = g->priority;
      l->req.declaration = g->declaration;
      l->req.placed = g->placed;
      l->shortfall = g->shortfall;
      // Planned again for this start's hand-over (a child, again with its
      // parent's plan: Recovery nests it); the row's planned action is what
      // the last start did, not a declaration.
      l->planFor(kernel, cfg.sampleIntervalUs);
      l->parent = g->parent;
      l->expectReport(g->reportsExit);
      l->keepWhenEmpty(g->keepWhenEmpty);
      if (!g->target.empty()) l->target = std::make_unique<lease::AttachTarget>(g->target);
    } else if (e.kind == ledger::kStarted || e.kind == ledger::kAdopted) {
      auto p = ledger::decodePlaced(body);
      if (!p) return Error{0, fmt::format("lease {}: {}", l->id, p.error().message)};
      placed = *p;
      startedNs = e.atNs;
    } else if (e.kind == ledger::kReleased) {
      l->releaseAsked();
    } else if (e.kind == ledger::kGpuBound) {
      auto b = ledger::decodeBound(body);
      if (!b) return Error{0, fmt::format("lease {}: {}", l->id, b.error().message)};
      if (b->event.kind == enforce::Verdict::Kill) {
        // Killed before the restart: the outcome still names it, and it is not killed twice.
        l->killedBeforeRestart(b->event.summary);
      }
    }
  }
  l->markRecovered(placed ? Lease::State::Running : Lease::State::Granted, grantedNs, startedNs);
  return l;
}

}  // namespace tally::daemon
