#include "daemon/lease_rows.h"

#include <fmt/format.h>

#include "lease/spec.h"
#include "util/clock.h"

namespace tally::daemon {

using json = nlohmann::json;

std::unique_ptr<Lease> newLease(lease::LeaseKind kind, uid_t owner, pid_t peerPid,
                                std::uint64_t conn, const rpc::api::Declared& d,
                                const config::Daemon& cfg, const Limits& limits,
                                const coverage::Handover& handover) {
  auto l = std::make_unique<Lease>();
  l->id = lease::newLeaseId();
  l->kind = kind;
  l->name = d.name.value_or(lease::kindName(kind));
  l->owner = owner;
  l->peerPid = peerPid;
  l->conn = conn;
  l->requestedAtNs = clock::realtimeNs();
  l->req.id = l->id;
  l->req.pools = d.pools;
  l->req.memoryMax = d.memoryMax;
  l->req.gpuMemoryMax = d.gpuMemoryMax;
  l->req.priority = d.priority;
  std::uint64_t waitUs = d.timeoutUs.value_or(cfg.queueTimeoutUs);
  if (waitUs) l->req.deadlineUs = clock::monotonicUs() + waitUs;
  l->bound = enforce::GpuBound{
      d.gpuMemoryMax, d.gpuMemoryHigh, d.gpuAction.value_or(enforce::Action::Kill),
      d.gpuOverSamples.value_or(enforce::kDefaultConsecutive), cfg.sampleIntervalUs};
  if (handover.gpuBoundAdvisory(d.gpuMemoryMax.has_value())) {
    l->bound.action = enforce::Action::Report;
    l->advisory = true;
  }
  l->attributes = d.attributes;
  l->boundReports = TokenBucket(limits.boundBurst, limits.boundRefillUs);
  return l;
}

ledger::GrantedRow grantedRow(const Lease& l) {
  ledger::GrantedRow row;
  row.kind = l.kind;
  row.name = l.name;
  row.owner = l.owner;
  row.peerPid = l.peerPid;
  row.pools = l.req.pools;
  row.priority = l.req.priority;
  row.memoryMax = l.req.memoryMax;
  row.gpuMemoryMax = l.req.gpuMemoryMax;
  row.gpuMemoryHigh = l.bound.high;
  row.attributes = l.attributes;
  if (l.bound.any()) {
    row.boundAction = l.bound.action;
    row.boundConsecutive = l.bound.consecutive;
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
  return {l.unit,
          l.cgroup,
          l.inode,
          l.countersCgroup,
          l.oomKillsAtAdoption,
          l.applied ? std::optional<probes::MemoryLimit>(l.applied->memoryMax) : std::nullopt};
}

// The lease its granted row describes, with what later rows add.
Result<std::unique_ptr<Lease>> rebuildLease(const std::vector<ledger::Event>& events,
                                            const config::Daemon& cfg,
                                            const coverage::Handover& handover,
                                            std::optional<ledger::PlacedRow>& placed) {
  auto l = std::make_unique<Lease>();
  l->id = events.front().leaseId;
  l->recovered = true;
  for (const auto& e : events) {
    json body = json::parse(e.body, nullptr, false);
    if (e.kind == ledger::kGranted) {
      auto g = ledger::decodeGranted(body);
      if (!g) return Error{0, fmt::format("lease {}: {}", l->id, g.error().message)};
      l->kind = g->kind;
      l->name = g->name;
      l->owner = g->owner;
      l->peerPid = g->peerPid;
      l->grantedAtNs = e.atNs;
      l->requestedAtNs = g->requestedAtNs;
      l->req.id = l->id;
      l->req.pools = g->pools;
      l->req.priority = g->priority;
      l->req.memoryMax = g->memoryMax;
      l->req.gpuMemoryMax = g->gpuMemoryMax;
      l->bound.max = g->gpuMemoryMax;
      l->bound.high = g->gpuMemoryHigh;
      l->bound.sampleIntervalUs = cfg.sampleIntervalUs;
      if (g->boundAction) l->bound.action = *g->boundAction;
      l->bound.consecutive = g->boundConsecutive;
      if (handover.gpuBoundAdvisory(l->bound.max.has_value())) {
        l->bound.action = enforce::Action::Report;
        l->advisory = true;
      }
      l->attributes = g->attributes;
      if (!g->target.empty()) l->target = std::make_unique<lease::AttachTarget>(g->target);
    } else if (e.kind == ledger::kStarted || e.kind == ledger::kAdopted) {
      auto p = ledger::decodePlaced(body);
      if (!p) return Error{0, fmt::format("lease {}: {}", l->id, p.error().message)};
      placed = *p;
      l->startedAtNs = e.atNs;
      if (p->oomKillsAtAdoption) l->oomKillsAtAdoption = p->oomKillsAtAdoption;
    } else if (e.kind == ledger::kReleased) {
      l->releaseRequested = true;
    } else if (e.kind == ledger::kGpuBound) {
      auto b = ledger::decodeBound(body);
      if (!b) return Error{0, fmt::format("lease {}: {}", l->id, b.error().message)};
      if (b->event.kind == enforce::Verdict::Kill) {
        // Killed before the restart: the outcome still names it, and it is not killed twice.
        l->tallyKill = b->event.summary;
        l->boundState.acted = true;
      }
    }
  }
  return l;
}

}  // namespace tally::daemon
