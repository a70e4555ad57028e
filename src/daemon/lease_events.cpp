#include "daemon/lease_events.h"

#include <fmt/format.h>
#include <syslog.h>

#include "admission/engine.h"
#include "daemon/lease_rows.h"
#include "rpc/messages.h"
#include "rpc/protocol.h"
#include "util/clean_text.h"
#include "util/clock.h"

namespace tally::daemon {

namespace {

using json = nlohmann::json;
// The pools a lease held, in its outcome record: the ledger's table shows them.
nlohmann::json withPools(const Lease& l, nlohmann::json body) {
  if (!l.req.pools.empty() && body.contains("lease") && body["lease"].is_object())
    body["lease"]["pools"] = l.req.pools;
  return body;
}
// A lifecycle row as subscribers hear it: the journal's line and outcome
// class, the same for a live row and a replayed one.
json lifecycleEvent(const std::string& kind, const std::string& lease, const std::string& name,
                    const std::vector<std::string>& pools, const journal::JournalEntry& entry) {
  rpc::api::LeaseEvent ev{lease, kind, name, pools, entry.message, std::nullopt};
  for (const auto& [field, value] : entry.fields)
    if (field == "TALLY_OUTCOME") ev.outcome = value;
  return rpc::api::encode(ev);
}

// When and which row: a follower orders by seq and asks again after the last.
void stamp(json& fields, const ledger::Event* row) {
  if (row) {
    fields["at_ns"] = row->atNs;
    fields["seq"] = row->seq;
  } else {
    fields["at_ns"] = clock::realtimeNs();  // the ledger refused it: the event still happened
  }
}

}  // namespace

LeaseEvents::LeaseEvents(ledger::Ledger& ledger, Outbox& outbox, journal::Journal* journal)
    : ledger_(ledger), outbox_(outbox), journal_(journal), startedAtNs_(clock::realtimeNs()) {
  // Every kind is exported from the start: a counter that appears only after
  // its first event loses that event in rate().
  for (auto v : {enforce::Verdict::HighCrossed, enforce::Verdict::HighCleared,
                 enforce::Verdict::Kill, enforce::Verdict::Report}) {
    boundCounts_[enforce::verdictName(v)] = 0;
  }
  for (lease::OutcomeClass c : lease::kAllOutcomeClasses)
    outcomeCounts_[lease::outcomeClassName(c)] = 0;
  outcomeCounts_[ledger::kWithdrawn] = 0;
}

Result<ledger::Event> LeaseEvents::record(const Lease& l, const char* kind, const json& body,
                                          std::uint64_t atNs) {
  auto ev = ledger_.appendEvent(l.id, kind,
                                body.dump(-1, ' ', false, json::error_handler_t::replace), atNs);
  if (ev) {
    rows_.charge(l.owner, clock::monotonicUs());
    announce(l, kind, body, ev ? &*ev : nullptr);
  }
  return ev;
}

void LeaseEvents::recordEnd(const Lease& l, const char* kind, const json& original,
                            const std::string& cls) {
  json body = withPools(l, original);
  std::string text = body.dump(-1, ' ', false, json::error_handler_t::replace);
  rows_.charge(l.owner, clock::monotonicUs());
  auto ev = ledger_.appendEvent(l.id, kind, text);
  if (!ev) {
    // Nothing lost: the row goes to the log when the ledger refuses it.
    fmt::print(stderr, "tally daemon: lease {}: {}; the {} row follows\n{}\n", l.id,
               ev.error().message, kind, text);
  }
  ++outcomeCounts_[cls];
  announce(l, kind, body, ev ? &*ev : nullptr);
}

Result<ledger::Event> LeaseEvents::recordOutcome(const Lease& l, const json& original,
                                                 const std::string& cls) {
  json record = withPools(l, original);
  auto ev = ledger_.appendEvent(l.id, ledger::kOutcome,
                                record.dump(-1, ' ', false, json::error_handler_t::replace));
  if (!ev) return ev;
  rows_.charge(l.owner, clock::monotonicUs());
  ++outcomeCounts_[cls];
  announce(l, ledger::kOutcome, record, &*ev);
  return ev;
}

void LeaseEvents::bound(Lease& l, const enforce::BoundEvent& e, const std::string& source) {
  l.metering.boundEvents.push_back(e);
  ++boundCounts_[enforce::verdictName(e.kind)];
  rows_.charge(l.owner, clock::monotonicUs());
  json body = ledger::encode(ledger::BoundRow{e, source});
  auto r = ledger_.appendEvent(l.id, ledger::kGpuBound,
                               body.dump(-1, ' ', false, json::error_handler_t::replace), e.atNs);
  if (!r) {
    fmt::print(stderr, "tally daemon: lease {}: the ledger refused a gpu-bound row: {}\n", l.id,
               r.error().message);
  }
  broadcast("gpu-bound", rpc::api::encode(rpc::api::GpuBoundEvent{l.id, l.name, source, e}),
            r ? &*r : nullptr);
  bool act = e.kind == enforce::Verdict::Kill || e.kind == enforce::Verdict::Report;
  if (act && l.ending.actSaid) return;
  if (act) l.ending.actSaid = true;
  auto entry = journal::boundEventEntry(l.id, l.name, e);
  note(entry.priority, entry.message, entry.fields);
}

Status LeaseEvents::clientBound(Lease& l, enforce::BoundEvent e, const Limits& limits) {
  if (!l.metering.boundReports.take(clock::monotonicUs())) {
    if (l.metering.boundRefused++ == 0) {
      note(4,
           fmt::format("lease {} ({}): its client reports GPU bound events faster than {} at once "
                       "and one per {} ms; the excess is refused and counted in the outcome",
                       l.id, l.name, limits.boundBurst, limits.boundRefillUs / 1000),
           {{"TALLY_LEASE", l.id}});
    }
    return Error{EAGAIN, fmt::format("too many GPU bound events for lease {}; this one was not "
                                     "recorded ({} refused so far)",
                                     l.id, l.metering.boundRefused)};
  }
  e.atNs = clock::realtimeNs();
  // The client's kill names the outcome only where the daemon's own samples
  // saw the lease over that limit: a client's word alone never makes its
  // workload's end "killed by tally".
  const std::uint64_t declared = l.req.gpuMemoryMax.value_or(0);
  const bool sawOver = declared != 0 && e.limit == declared && l.metering.meter &&
                       l.metering.meter->gpu().peakBytes.value_or(0) > declared;
  if (e.kind == enforce::Verdict::Kill && !l.ending.tallyKill) {
    if (sawOver)
      l.ending.tallyKill = e.summary;
    else
      l.ending.clientKill = e.summary;
  }
  bound(l, e, "client");
  return Ok{};
}

void LeaseEvents::coverageAtStart(const coverage::Assessment& a,
                                  const coverage::Handover& handover) {
  auto row = coverageRow(a, handover, ledger::lastCoverage(ledger_));
  if (row.changedFrom && row.changedFrom->second != row.coverage) {
    note(4,
         fmt::format("GTT coverage changed from {} (kernel {}) to {} (kernel {}): {}",
                     row.changedFrom->second, row.changedFrom->first, row.coverage, a.kernel,
                     row.tallyDoes),
         {{"TALLY_EVENT", "coverage-changed"},
          {"TALLY_COVERAGE", row.coverage},
          {"TALLY_KERNEL", a.kernel}});
  }
  json body = ledger::encode(row);
  auto r = ledger_.appendEvent("", ledger::kCoverage, body.dump());
  if (!r) {
    fmt::print(stderr, "tally daemon: the ledger refused the coverage row: {}\n",
               r.error().message);
  }
  broadcast("coverage", body, r ? &*r : nullptr);
}

rpc::api::Queued LeaseEvents::queuedEvent(const LeaseBook::Move& mv) {
  rpc::api::Queued q;
  q.lease = mv.lease ? mv.lease->id : "";
  q.position = mv.position;
  q.queued = mv.queued;
  q.waitingFor = mv.reason ? admission::waitName(*mv.reason) : "grant";
  q.pool = mv.pool;
  q.needed = mv.figures.needed;
  q.free = mv.figures.free;
  q.unit = mv.figures.unit;
  q.detail = mv.figures.detail;
  return q;
}

void LeaseEvents::positions(const std::vector<LeaseBook::Move>& moves) {
  for (const auto& mv : moves) {
    if (!mv.lease) continue;
    outbox_.send(mv.lease->client.conn, rpc::encodeEvent(mv.lease->client.pendingId, "queued",
                                                         rpc::api::encode(queuedEvent(mv))));
  }
}

void LeaseEvents::broadcast(const std::string& event, json fields, const ledger::Event* row) {
  stamp(fields, row);
  // A copy: a send may drop a subscriber that stopped reading (and unsubscribe it).
  auto to = subscribers_;
  for (const auto& [conn, id] : to) outbox_.send(conn, rpc::encodeEvent(id, event, fields));
}

void LeaseEvents::announce(const Lease& l, const std::string& kind, const json& body,
                           const ledger::Event* row) {
  journal::VerifiedPlace place{l.place.unit, l.place.cgroup};
  auto entry = journal::lifecycleEntry(kind, l.id, l.name, l.req.pools, body, l.attributes, place);
  note(entry.priority, entry.message, entry.fields);
  // Subscribers see the same lifecycle as the journal, one "lease" event per row.
  broadcast("lease", lifecycleEvent(kind, l.id, l.name, l.req.pools, entry), row);
}

Result<LeaseEvents::Replay> LeaseEvents::replay(const rpc::api::Subscribe& s) {
  Replay out;
  if (!s.sinceNs && !s.afterSeq) return out;
  auto rows =
      ledger_.eventsFrom(s.sinceNs.value_or(0), s.afterSeq.value_or(0), rpc::api::kMaxReplayed + 1);
  if (!rows) return rows.error();
  if (rows->size() > rpc::api::kMaxReplayed) {
    rows->pop_back();
    out.truncated = true;
  }
  // What each lease's granted row declared (its name, pools, attributes) and
  // where it was last placed: the words its later rows were announced with.
  struct Facts {
    ledger::GrantedRow granted;
    journal::VerifiedPlace place;
  };
  std::map<std::string, std::optional<Facts>> facts;
  auto factsOf = [&](const std::string& lease) -> std::optional<Facts>& {
    auto [it, fresh] = facts.try_emplace(lease);
    if (!fresh) return it->second;
    auto own = ledger_.events(lease);
    if (!own) return it->second;
    for (const auto& row : *own) {
      if (row.kind != ledger::kGranted) continue;
      json body = json::parse(row.body, nullptr, false);
      if (auto g = ledger::decodeGranted(body)) it->second = Facts{std::move(*g), {}};
      break;
    }
    return it->second;
  };
  for (const auto& row : *rows) {
    json body = json::parse(row.body, nullptr, false);
    if (body.is_discarded()) continue;
    std::pair<std::string, json> ev;
    if (row.kind == ledger::kCoverage) {
      ev = {"coverage", std::move(body)};
    } else if (row.leaseId.empty()) {
      continue;
    } else if (auto& f = factsOf(row.leaseId); !f) {
      continue;  // a lease whose granted row cannot be read: nothing to say it with
    } else if (row.kind == ledger::kGpuBound) {
      auto b = ledger::decodeBound(body);
      if (!b) continue;
      ev = {"gpu-bound", rpc::api::encode(rpc::api::GpuBoundEvent{row.leaseId, f->granted.name,
                                                                  b->source, b->event})};
    } else if (row.kind == ledger::kGranted || row.kind == ledger::kStarted ||
               row.kind == ledger::kAdopted || row.kind == ledger::kReadopted ||
               row.kind == ledger::kReleased || ledger::isTerminal(row.kind)) {
      if (row.kind == ledger::kStarted || row.kind == ledger::kAdopted ||
          row.kind == ledger::kReadopted) {
        if (auto p = ledger::decodePlaced(body)) f->place = {p->unit, p->cgroup};
      }
      auto entry = journal::lifecycleEntry(row.kind, row.leaseId, f->granted.name, f->granted.pools,
                                           body, f->granted.attributes, f->place);
      ev = {"lease",
            lifecycleEvent(row.kind, row.leaseId, f->granted.name, f->granted.pools, entry)};
    } else {
      continue;
    }
    stamp(ev.second, &row);
    ev.second["replayed"] = true;
    out.events.push_back(std::move(ev));
  }
  return out;
}

void LeaseEvents::queued(const Lease& l) {
  broadcast("lease",
            rpc::api::encode(rpc::api::LeaseEvent{l.id, "queued", l.name, l.req.pools,
                                                  fmt::format("lease {} ({}): queued for {}", l.id,
                                                              l.name, fmt::join(l.req.pools, ",")),
                                                  std::nullopt}),
            nullptr);
}

void LeaseEvents::ledgerHealth() {
  auto failure = ledger_.writeFailure();
  if (failure == writeFailureSaid_) return;
  if (failure) {
    note(LOG_ERR,
         fmt::format("the ledger {} cannot write: {}. Running leases stay metered and bounded; "
                     "new leases and releases are refused until it writes again (free space "
                     "or fix the state directory)",
                     ledger_.path(), *failure),
         {{"TALLY_LEDGER", ledger_.path()}});
  } else {
    note(LOG_NOTICE, fmt::format("the ledger {} writes again", ledger_.path()),
         {{"TALLY_LEDGER", ledger_.path()}});
  }
  writeFailureSaid_ = failure;
}

void LeaseEvents::note(int priority, const std::string& message,
                       const std::vector<std::pair<std::string, std::string>>& fields) {
  if (journal_)
    journal_->note(priority, message, fields);
  else
    fmt::print(stderr, "tally daemon: {}\n", text::printable(message));
}

}  // namespace tally::daemon
