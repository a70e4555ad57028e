#include "daemon/lease_events.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <syslog.h>

#include <tuple>

#include "admission/engine.h"
#include "daemon/lease_rows.h"
#include "rpc/messages.h"
#include "rpc/protocol.h"
#include "util/clean_text.h"
#include "util/clock.h"
#include "util/units.h"

namespace tally::daemon {

namespace {

using json = nlohmann::json;
// The pools a lease held and whose it was, in its outcome record: the
// ledger's table shows them. The owner is the daemon's word (the peer's uid
// at the socket), never what a client's record says.
nlohmann::json withPools(const Lease& l, nlohmann::json body) {
  if (!body.contains("lease") || !body["lease"].is_object()) return body;
  if (!l.req.pools.empty()) body["lease"]["pools"] = l.req.pools;
  body["lease"]["owner_uid"] = l.owner;
  return body;
}
// A lifecycle row as subscribers hear it: the journal's line and outcome
// class, the same for a live row and a replayed one.
json lifecycleEvent(const std::string& kind, const std::string& lease, const std::string& name,
                    const std::vector<std::string>& pools, std::uint32_t owner,
                    const journal::JournalEntry& entry) {
  rpc::api::LeaseEvent ev{lease, kind, name, pools, entry.message, std::nullopt, owner};
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
  for (auto v : enforce::kBoundEventKinds) boundCounts_[enforce::verdictName(v)] = 0;
  for (lease::OutcomeClass c : lease::kAllOutcomeClasses)
    outcomeCounts_[lease::outcomeClassName(c)] = 0;
  outcomeCounts_[ledger::kWithdrawn] = 0;
}

Result<ledger::Event> LeaseEvents::record(const Lease& l, const char* kind, const json& body,
                                          std::uint64_t atNs) {
  std::string text = body.dump(-1, ' ', false, json::error_handler_t::replace);
  auto ev = ledger_.appendEvent(l.id, kind, text, atNs);
  if (ev) {
    rows_.charge(l.owner, clock::monotonicUs(), text.size());
    announce(l, kind, body, ev ? &*ev : nullptr);
  }
  return ev;
}

void LeaseEvents::recordEnd(const Lease& l, const char* kind, const json& original,
                            const std::string& cls) {
  json body = withPools(l, original);
  std::string text = body.dump(-1, ' ', false, json::error_handler_t::replace);
  rows_.charge(l.owner, clock::monotonicUs(), text.size());
  auto ev = ledger_.appendEvent(l.id, kind, text);
  if (!ev) {
    // Nothing lost: the row goes to the log when the ledger refuses it.
    note(LOG_ERR,
         fmt::format("lease {}: {}; the {} row follows: {}", l.id, ev.error().message, kind, text),
         {{"TALLY_LEASE", l.id}});
  }
  ++outcomeCounts_[cls];
  announce(l, kind, body, ev ? &*ev : nullptr);
}

Result<ledger::Event> LeaseEvents::recordOutcome(const Lease& l, const json& original,
                                                 const std::string& cls) {
  json record = withPools(l, original);
  std::string text = record.dump(-1, ' ', false, json::error_handler_t::replace);
  auto ev = ledger_.appendEvent(l.id, ledger::kOutcome, text);
  if (!ev) return ev;
  rows_.charge(l.owner, clock::monotonicUs(), text.size());
  ++outcomeCounts_[cls];
  announce(l, ledger::kOutcome, record, &*ev);
  return ev;
}

void LeaseEvents::bound(Lease& l, const enforce::BoundEvent& e, const std::string& source) {
  l.said_.boundEvents.push_back(e);
  ++boundCounts_[enforce::verdictName(e.kind)];
  json body = ledger::encode(ledger::BoundRow{e, source});
  std::string text = body.dump(-1, ' ', false, json::error_handler_t::replace);
  rows_.charge(l.owner, clock::monotonicUs(), text.size());
  auto r = ledger_.appendEvent(l.id, ledger::kGpuBound, text, e.atNs);
  if (!r) {
    note(LOG_ERR,
         fmt::format("lease {}: the ledger refused a gpu-bound row: {}", l.id, r.error().message),
         {{"TALLY_LEASE", l.id}});
  }
  broadcast("gpu-bound",
            rpc::api::encode(rpc::api::GpuBoundEvent{l.id, l.name(), source, e, l.owner}),
            r ? &*r : nullptr);
  bool act = e.kind == enforce::Verdict::Kill || e.kind == enforce::Verdict::Report;
  if (act && l.said_.actSaid) return;
  if (act) l.said_.actSaid = true;
  auto entry = journal::boundEventEntry(l.id, l.name(), e);
  note(entry.priority, entry.message, entry.fields);
}

Status LeaseEvents::clientBound(Lease& l, enforce::BoundEvent e, const Limits& limits) {
  // Made at the first report, with this daemon's limits.
  if (!l.said_.clientReports)
    l.said_.clientReports.emplace(limits.boundBurst, limits.boundRefillUs);
  if (!l.said_.clientReports->take(clock::monotonicUs())) {
    if (l.said_.clientReportsRefused++ == 0) {
      note(4,
           fmt::format("lease {} ({}): its client reports GPU bound events faster than {} at once "
                       "and one per {} ms; the excess is refused and counted in the outcome",
                       l.id, l.name(), limits.boundBurst, limits.boundRefillUs / 1000),
           {{"TALLY_LEASE", l.id}});
    }
    return Error{EAGAIN, fmt::format("too many GPU bound events for lease {}; this one was not "
                                     "recorded ({} refused so far)",
                                     l.id, l.said_.clientReportsRefused)};
  }
  e.atNs = clock::realtimeNs();
  // The client's kill names the outcome only where the daemon's own samples
  // saw the lease over that limit: a client's word alone never makes its
  // workload's end "killed by tally".
  // A bound of 0 is a bound (no GPU memory): absent only when none was planned.
  const std::optional<std::uint64_t> planned = l.plan().bound.max;
  const bool sawOver = planned && e.limit == *planned && l.metering().meter &&
                       l.metering().meter->gpu().peakBytes.value_or(0) > *planned;
  if (e.kind == enforce::Verdict::Kill && !l.ending().tallyKill) {
    if (sawOver)
      l.killedByTally(e.summary);
    else
      l.killedByClient(e.summary);
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
    note(LOG_ERR, fmt::format("the ledger refused the coverage row: {}", r.error().message));
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
    outbox_.send(mv.lease->client().conn,
                 rpc::encodeEvent(mv.lease->client().pendingId, rpc::api::kQueuedKind,
                                  rpc::api::encode(queuedEvent(mv))));
  }
}

void LeaseEvents::broadcast(const std::string& event, json fields, const ledger::Event* row) {
  stamp(fields, row);
  // The connections first: a send may drop a subscriber that stopped reading
  // (and unsubscribe it).
  std::vector<std::uint64_t> to;
  for (const auto& [conn, f] : subscribers_) to.push_back(conn);
  for (auto conn : to) {
    auto it = subscribers_.find(conn);
    if (it == subscribers_.end()) continue;
    Follower& f = it->second;
    if (!f.replay) {
      outbox_.send(conn, rpc::encodeEvent(f.requestId, event, fields));
    } else if (f.held.size() < kMaxHeldEvents) {
      f.held.emplace_back(event, fields);  // after its replay, in order
    } else {
      outbox_.send(conn, rpc::encodeError(f.requestId,
                                          {rpc::code::kBusy,
                                           "this follower's replay fell behind the live events; "
                                           "subscribe again after the last seq it heard"}));
      subscribers_.erase(it);
    }
  }
}

void LeaseEvents::announce(const Lease& l, const std::string& kind, const json& body,
                           const ledger::Event* row) {
  journal::VerifiedPlace place{l.place.unit, l.place.cgroup};
  auto entry =
      journal::lifecycleEntry(kind, l.id, l.name(), l.req.pools, body, l.attributes(), place);
  note(entry.priority, entry.message, entry.fields);
  // Subscribers see the same lifecycle as the journal, one "lease" event per row.
  broadcast("lease", lifecycleEvent(kind, l.id, l.name(), l.req.pools, l.owner, entry), row);
}

Status LeaseEvents::follow(std::uint64_t conn, const json& requestId, const rpc::api::Subscribe& s,
                           uid_t uid, std::size_t maxReplaysPerUid) {
  if (subscribers_.count(conn))
    return Error{EEXIST,
                 "this connection already follows the events (one subscription per "
                 "connection; open another to subscribe again)"};
  Follower f{requestId, uid, std::nullopt, {}};
  if (s.sinceNs || s.afterSeq) {
    std::size_t mine = 0;
    for (const auto& [c, other] : subscribers_)
      if (c != conn && other.uid == uid && other.replay) ++mine;
    if (uid != 0 && mine >= maxReplaysPerUid)
      return Error{EBUSY, fmt::format("uid {} already has {} replays of the ledger under way (the "
                                      "daemon's max_replays_per_uid); wait for one to finish",
                                      uid, mine)};
    ReplayCursor c;
    c.sinceNs = s.sinceNs.value_or(0);
    c.afterSeq = s.afterSeq.value_or(0);
    if (s.sinceNs) {
      auto before = ledger_.seqBefore(*s.sinceNs);
      if (!before) return before.error();
      c.afterSeq = std::max(c.afterSeq, *before);
    }
    auto head = ledger_.headSeq();
    if (!head) return head.error();
    c.uptoSeq = *head;
    f.replay = std::move(c);
  }
  subscribers_[conn] = std::move(f);
  return Ok{};
}

bool LeaseEvents::replaying() const {
  for (const auto& [conn, f] : subscribers_)
    if (f.replay && outbox_.backlog(conn) <= kReplayBacklogBytes) return true;
  return false;
}

bool LeaseEvents::replaySlice() {
  // The next follower replaying after the one served last, round-robin.
  auto it = subscribers_.upper_bound(replayTurn_);
  for (std::size_t looked = 0; looked < subscribers_.size(); ++looked, ++it) {
    if (it == subscribers_.end()) it = subscribers_.begin();
    if (it->second.replay && outbox_.backlog(it->first) <= kReplayBacklogBytes) break;
  }
  if (it == subscribers_.end() || !it->second.replay ||
      outbox_.backlog(it->first) > kReplayBacklogBytes)
    return false;  // none, or every one waits for its reader
  std::uint64_t conn = replayTurn_ = it->first;
  Follower& f = it->second;
  ReplayCursor& c = *f.replay;
  auto rows = ledger_.eventsFrom(c.sinceNs, c.afterSeq, kReplaySliceRows, c.uptoSeq);
  if (!rows) {
    endReplay(conn, f, false,
              fmt::format("cannot read the ledger's rows: {}", rows.error().message));
    return replaying();
  }
  for (const auto& row : *rows) {
    if (c.sent == rpc::api::kMaxReplayed) {
      endReplay(conn, f, true, "");  // more rows than a replay holds: ask after the last seq
      return replaying();
    }
    c.afterSeq = row.seq;
    auto ev = replayed(c, row);
    if (!ev) continue;
    ++c.sent;
    if (!outbox_.send(conn, rpc::encodeEvent(f.requestId, ev->first, ev->second))) {
      subscribers_.erase(conn);  // it stopped reading and was dropped
      return replaying();
    }
  }
  if (rows->size() < kReplaySliceRows || c.afterSeq >= c.uptoSeq) endReplay(conn, f, false, "");
  return replaying();
}

void LeaseEvents::endReplay(std::uint64_t conn, Follower& f, bool truncated,
                            const std::string& error) {
  rpc::api::ReplayedEvent done{f.replay->sent, truncated, std::nullopt};
  if (!error.empty()) done.error = error;
  f.replay.reset();
  auto held = std::move(f.held);
  json id = f.requestId;
  if (!outbox_.send(conn, rpc::encodeEvent(id, "replayed", rpc::api::encode(done)))) {
    subscribers_.erase(conn);
    return;
  }
  for (auto& [event, fields] : held)
    if (!outbox_.send(conn, rpc::encodeEvent(id, event, fields)))
      return (void)subscribers_.erase(conn);
}

std::optional<std::pair<std::string, nlohmann::json>> LeaseEvents::replayed(
    ReplayCursor& c, const ledger::Event& row) {
  // What each lease's granted row declared (its name, pools, attributes) and
  // where it was last placed: the words its later rows were announced with.
  // One look-up by the lease index per lease, kept for the replay.
  auto factsOf = [&](const std::string& lease) -> std::optional<ReplayCursor::Facts>& {
    auto [it, fresh] = c.facts.try_emplace(lease);
    if (!fresh) return it->second;
    auto granted = ledger_.firstOfKind(lease, ledger::kGranted);
    if (!granted || !*granted) return it->second;
    json body = json::parse((*granted)->body, nullptr, false);
    if (auto g = ledger::decodeGranted(body)) it->second = ReplayCursor::Facts{std::move(*g), {}};
    return it->second;
  };
  json body = json::parse(row.body, nullptr, false);
  if (body.is_discarded()) return std::nullopt;
  std::pair<std::string, json> ev;
  if (row.kind == ledger::kCoverage) {
    ev = {"coverage", std::move(body)};
  } else if (row.leaseId.empty()) {
    return std::nullopt;
  } else if (auto& f = factsOf(row.leaseId); !f) {
    return std::nullopt;  // a lease whose granted row cannot be read: nothing to say it with
  } else if (row.kind == ledger::kGpuBound) {
    auto b = ledger::decodeBound(body);
    if (!b) return std::nullopt;
    ev = {"gpu-bound",
          rpc::api::encode(rpc::api::GpuBoundEvent{row.leaseId, f->granted.declaration.name,
                                                   b->source, b->event, f->granted.owner})};
  } else if (row.kind == ledger::kGranted || row.kind == ledger::kStarted ||
             row.kind == ledger::kAdopted || row.kind == ledger::kReadopted ||
             row.kind == ledger::kReleased || ledger::isTerminal(row.kind)) {
    if (row.kind == ledger::kStarted || row.kind == ledger::kAdopted ||
        row.kind == ledger::kReadopted) {
      if (auto p = ledger::decodePlaced(body)) f->place = {p->unit, p->cgroup};
    }
    auto entry = journal::lifecycleEntry(row.kind, row.leaseId, f->granted.declaration.name,
                                         f->granted.pools, body, f->granted.declaration.attributes,
                                         f->place);
    ev = {"lease", lifecycleEvent(row.kind, row.leaseId, f->granted.declaration.name,
                                  f->granted.pools, f->granted.owner, entry)};
  } else {
    return std::nullopt;
  }
  stamp(ev.second, &row);
  ev.second["replayed"] = true;
  return ev;
}

void LeaseEvents::queued(const Lease& l) {
  broadcast(
      "lease",
      rpc::api::encode(rpc::api::LeaseEvent{
          l.id, rpc::api::kQueuedKind, l.name(), l.req.pools,
          fmt::format("lease {} ({}): queued for {}", l.id, l.name(), fmt::join(l.req.pools, ",")),
          std::nullopt, l.owner}),
      nullptr);
}

void LeaseEvents::leftQueue(const Lease& l, const char* kind, const std::string& why) {
  ++queueEnds_[kind];
  std::string message = fmt::format("lease {} ({}): {} in {}: {}", l.id, l.name(), kind,
                                    fmt::join(l.req.pools, ","), why);
  // A timeout is a request the box could not serve: worth a warning.
  note(std::string_view(kind) == rpc::api::kQueueTimeoutKind ? LOG_WARNING : LOG_INFO, message,
       {{"TALLY_LEASE", l.id}, {"TALLY_EVENT", kind}});
  broadcast("lease",
            rpc::api::encode(rpc::api::LeaseEvent{l.id, kind, l.name(), l.req.pools, message,
                                                  std::nullopt, l.owner}),
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

void LeaseEvents::placedShortfall(const Lease& l, const lease::Shortfall& s) {
  std::vector<std::string> said;
  for (auto [key, fig, what] :
       {std::tuple{"host", &s.host, "host memory"}, std::tuple{"gpu", &s.gpu, "GPU memory"}}) {
    if (!*fig) continue;
    ShortfallCount& c = shortfalls_[key];
    ++c.grants;
    c.bytes += (*fig)->bytes();
    said.push_back(fmt::format("{} {} short (needs {}, {} free)", what,
                               units::humanBytes((*fig)->bytes()),
                               units::humanBytes((*fig)->needed), units::humanBytes((*fig)->free)));
  }
  note(LOG_WARNING,
       fmt::format("lease {} ({}): granted as the site's scheduler placed it, with measured "
                   "headroom in pool {} {}: its bound holds it to its own count; if this "
                   "repeats, the scheduler's count for this node is more than it has free",
                   l.id, l.name(), s.pool, fmt::join(said, " and ")),
       {{"TALLY_LEASE", l.id}, {"TALLY_POOL", s.pool}});
}

void LeaseEvents::note(int priority, const std::string& message,
                       const std::vector<std::pair<std::string, std::string>>& fields) {
  if (journal_)
    journal_->note(priority, message, fields);
  else
    fmt::print(stderr, "tally daemon: {}\n", text::printable(message));
}

}  // namespace tally::daemon
