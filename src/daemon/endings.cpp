#include "daemon/endings.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <syslog.h>

#include <algorithm>

#include "lease/outcome.h"
#include "lease/record.h"
#include "ledger/rows.h"
#include "util/clock.h"
#include "util/json_view.h"
#include "util/sha256.h"
#include "util/text.h"

namespace tally::daemon {

using json = nlohmann::json;

namespace {

// The record's part every daemon-side ending shares.
lease::LeaseRecord baseRecord(const Lease& l) {
  lease::LeaseRecord rec;
  rec.spec.id = l.id;
  rec.spec.declaration = l.req.declaration;
  rec.unit = l.place.unit;
  rec.cgroup = l.place.cgroup;
  rec.startedAtNs = l.startedAtNs();
  rec.endedAtNs = clock::realtimeNs();
  return rec;
}

cgroup::FinalCounters finalCounters(const fs::Root* root, const Lease& l) {
  if (l.place.countersCg) return cgroup::readFinalCounters(*l.place.countersCg);
  if (root && !l.place.countersCgroup.empty())
    return cgroup::readFinalCounters(*root, l.place.countersCgroup);
  return {};
}

}  // namespace

void Endings::noteCounters(Lease& l, bool emptied) {
  auto c = finalCounters(env_.cgroupRoot, l);
  if (!c.events && !c.memoryPeak) return;  // gone already: what was read before stays
  // Removed between two of its files: what this read missed, the last had.
  if (l.ending().lastCounters) cgroup::fillUnread(c, *l.ending().lastCounters);
  l.countersRead(std::move(c), clock::realtimeNs(), emptied);
}

bool Endings::populated(const Lease& l) {
  if (!l.place.countersCg) return false;
  auto p = l.place.countersCg->populated();
  return p && *p;  // unreadable counts as not running, as a vanished cgroup does
}

bool Endings::over(const Lease& l) {
  if (!l.place.countersCg) return true;
  auto p = l.place.countersCg->populated();
  if (!p) return true;
  if (*p || !l.ending().keptWhenEmpty) return !*p;
  // Kept while empty: over once its cgroup is removed (populated() reads a
  // removed cgroup as empty; its cgroup.events is gone with it).
  return !l.place.countersCg->statFile(cgroup::file::kEvents);
}

void Endings::end(Lease& l, const char* kind, const json& body, const std::string& cls) {
  endChildren(l);
  std::string id = l.id;
  events_.recordEnd(l, kind, body, cls);
  env_.watches.unwatch(id);
  book_.forget(id);  // frees l
  freed_();
}

void Endings::endChildren(const Lease& parent) {
  std::vector<std::string> children;
  for (const auto& [id, l] : book_.all())
    if (l->parent == parent.id) children.push_back(id);
  for (const auto& id : children) {
    Lease* c = book_.find(id);
    if (!c) continue;
    // Still running: released with its parent (the workload goes on, no
    // longer leased); else it emptied with it, and says so.
    bool running = populated(*c);
    if (running) c->endedWithParent(fmt::format("{} ({})", parent.id, parent.name()));
    finishAttached(*c, running);
  }
}

lease::LeaseRecord Endings::meteredRecord(Lease& l, const char* manager) {
  if (beforeRecord_) beforeRecord_(l);
  lease::LeaseRecord rec = baseRecord(l);
  // The bound as planned: made advisory by the hand-over, or a child's parent's.
  rec.spec.declaration.gpuMemoryMax = l.plan().bound.max;
  rec.spec.declaration.gpuAction = l.plan().bound.action;
  rec.spec.declaration.gpuOverSamples = l.plan().bound.consecutive;
  rec.spec.sampleIntervalUs = cfg_.sampleIntervalUs;
  rec.gpuBound = l.said().boundEvents;
  rec.manager = manager;
  rec.applied = l.place.applied;
  if (l.metering().meter) {
    l.metering().meter->sample();
    rec.host = l.metering().meter->host();
    rec.gpu = l.metering().meter->gpu();
  }
  rec.counters = finalCounters(env_.cgroupRoot, l);
  if (l.ending().lastCounters) {
    // Removed before its end (or between two of its files as it was read):
    // the counters read while it existed, said as such.
    const bool noneRead = !rec.counters.events && !rec.counters.memoryPeak;
    if (noneRead) rec.counters = *l.ending().lastCounters;
    auto filled = noneRead ? std::vector<std::string>{}
                           : cgroup::fillUnread(rec.counters, *l.ending().lastCounters);
    if (noneRead || !filled.empty()) {
      std::string when =
          l.ending().lastCountersAtEmpty
              ? "read when the cgroup emptied, before it was removed"
              : "read when memory.events last changed, before the cgroup was removed; a later "
                "change is not seen";
      rec.counters.readBeforeEndAtNs = l.ending().lastCountersAtNs;
      rec.counters.readBeforeEnd =
          noneRead ? when : fmt::format("{} {}", fmt::join(filled, ", "), when);
      rec.counters.eventsReadBeforeEnd =
          noneRead ||
          std::find(filled.begin(), filled.end(), cgroup::file::kMemoryEvents) != filled.end();
    }
  }
  return rec;
}

void Endings::finishAttached(Lease& l, bool released, std::optional<std::string> unitEnding) {
  lease::LeaseRecord rec = meteredRecord(l, "attached");
  lease::AttachedFacts f;
  f.released = released;
  f.oomKillsAtAdoption = l.place.oomKillsAtAdoption;
  f.tallyKill = l.ending().tallyKill;
  f.reported = l.ending().reported;
  f.parentEnded = l.ending().parentEnded;
  f.unitEnding = std::move(unitEnding);
  if (l.place.applied) f.memoryMax = l.place.applied->memoryMax;
  f.memoryEvents = rec.counters.events;
  f.memoryEventsUnknown = rec.counters.eventsUnknown;
  if (rec.counters.eventsReadBeforeEnd) f.memoryEventsReadBeforeEnd = rec.counters.readBeforeEnd;
  rec.outcome = lease::classifyAttached(f);
  json body = lease::recordJson(rec);
  body["lease"]["kind"] = lease::kindName(l.kind);
  if (l.target && !l.target->empty()) body["lease"]["target"] = ledger::targetJson(*l.target);
  if (l.ending().recovered) body["daemon"] = {{"readopted_after_restart", true}};
  end(l, ledger::kOutcome, body, lease::outcomeClassName(rec.outcome.cls));
}

namespace {

// What only a run lease's client saw: the wait status it reaped.
lease::Ending clientEnding(const json& outcome, std::optional<std::string>& unknownWhy) {
  using jsonview::count;
  using jsonview::get;
  if (auto code = count(get(outcome, "exit_code")); code && *code <= 255)
    return {lease::Ending::Kind::Exited, static_cast<int>(*code), 0, 0};
  if (auto sig = count(get(outcome, "signal")); sig && *sig >= 1 && *sig <= 64)
    return {lease::Ending::Kind::Signaled, 0, static_cast<int>(*sig), 0};
  unknownWhy = "its client reported no wait status";
  return {lease::Ending::Kind::Unknown, 0, 0, 0};
}

std::optional<std::uint64_t> declaredBytes(const json& declared, const char* key) {
  return jsonview::count(jsonview::get(declared, key));
}

}  // namespace

json clientDigest(const json& client) {
  // A run lease's client may send 128 KiB of record; the ledger keeps a
  // digest of it (the hash of its canonical JSON, its size) and the fields
  // any reader uses, so a user's outcome row costs a bounded number of
  // bytes whatever her client sends.
  // Each field is copied as the value it must be (a number, a known word, a
  // summary the decoder already cleaned and cut to 1 KiB), never as the raw
  // JSON the client sent in its place.
  using jsonview::get;
  std::string canonical = client.dump(-1, ' ', false, json::error_handler_t::replace);
  json d{{"sha256", sha256::hex(canonical)}, {"bytes", canonical.size()}};
  const json& said = get(client, "outcome");
  if (const json& c = get(said, "class");
      c.is_string() && lease::parseOutcomeClass(c.get<std::string>()))
    d["outcome"]["class"] = c;
  if (const json& s = get(said, "summary");
      s.is_string() && s.get_ref<const std::string&>().size() <= 1024)
    d["outcome"]["summary"] = s;
  for (const char* k : {"exit_code", "signal", "tally_exit_status"})
    if (const json& n = get(said, k); n.is_number_integer()) d["outcome"][k] = n;
  const json& declared = get(client, "declared");
  for (const char* k : {"memory_high", "memory_swap_max"})
    if (auto n = jsonview::count(get(declared, k))) d["declared"][k] = *n;
  if (const json& p = get(declared, "oom_policy");
      p.is_string() && (p == "kill" || p == "stop" || p == "continue"))
    d["declared"]["oom_policy"] = p;
  return d;
}

json Endings::runOutcome(Lease& l, const json& client) {
  using jsonview::get;
  using jsonview::text;
  lease::LeaseRecord rec = meteredRecord(l, "client");
  const json& declared = get(client, "declared");
  // Declared by the client alone (the daemon applies none of them itself;
  // what the kernel holds is "applied", read back by the daemon).
  rec.spec.memoryHigh = declaredBytes(declared, "memory_high");
  rec.spec.memorySwapMax = declaredBytes(declared, "memory_swap_max");
  const std::string policy = text(declared, "oom_policy");
  rec.spec.oomPolicy = policy == "stop"       ? lease::OomPolicy::Stop
                       : policy == "continue" ? lease::OomPolicy::Continue
                                              : lease::OomPolicy::Kill;
  // The command as the client ran it, within kCommandBytes (an argv of
  // 100 KiB is the client's to keep; the row says how many arguments it left out).
  // Each argument costs its bytes and 8 more (its quotes, comma and escapes
  // of a short one), so 40,000 empty arguments cost what they take in the row.
  std::size_t commandBytes = 0, commandOmitted = 0;
  for (const auto& arg : get(get(client, "lease"), "command")) {
    if (!arg.is_string()) continue;
    const auto& a = arg.get_ref<const std::string&>();
    if (commandOmitted || commandBytes + a.size() + 8 > kCommandBytes ||
        rec.spec.command.size() == kCommandArgs) {
      ++commandOmitted;
      continue;
    }
    commandBytes += a.size() + 8;
    rec.spec.command.push_back(a);
  }

  const json& said = get(client, "outcome");
  lease::OutcomeFacts f;
  f.ending = clientEnding(said, f.endingUnknown);
  f.policy = rec.spec.oomPolicy;
  f.memoryEvents = rec.counters.events;
  f.memoryEventsUnknown = rec.counters.eventsUnknown;
  if (l.place.applied) f.memoryMax = l.place.applied->memoryMax;
  f.tallyKill = l.ending().tallyKill;
  if (l.ending().releaseRequested) f.stopSignal = SIGTERM;
  rec.outcome = lease::classify(f);
  const std::string claimed = text(said, "class");
  const std::string claimedSummary = text(said, "summary");
  if (l.ending().releaseRequested && rec.outcome.cls == lease::OutcomeClass::Stopped) {
    rec.outcome.summary = "stopped by tally lease release: " + claimedSummary;
  } else if (!l.ending().releaseRequested &&
             (rec.outcome.cls == lease::OutcomeClass::Exited ||
              rec.outcome.cls == lease::OutcomeClass::KilledBySignal ||
              rec.outcome.cls == lease::OutcomeClass::Unknown) &&
             (claimed == "stopped" || claimed == "exec-failed")) {
    // Its own stop signal and a command that could not run are what only
    // the client saw; the daemon's evidence (a kill, an OOM) outranks them.
    rec.outcome.cls = *lease::parseOutcomeClass(claimed);
    rec.outcome.summary = claimedSummary;
  }
  if (l.ending().tallyKill && rec.outcome.cls != lease::OutcomeClass::KilledByTally) {
    // tally killed it (the daemon did, or saw it over the limit its client
    // killed it at): that is how it ended, whatever wait status is claimed.
    rec.outcome.cls = lease::OutcomeClass::KilledByTally;
    rec.outcome.summary = *l.ending().tallyKill + "; its client reported: " +
                          (claimedSummary.empty() ? claimed : claimedSummary);
  }
  if (!l.ending().tallyKill && l.ending().clientKill) {
    rec.outcome.summary += "; its client reports killing it (" + *l.ending().clientKill +
                           "), over a limit the daemon's samples never saw it cross";
  }
  json body = lease::recordJson(rec);
  body["lease"]["kind"] = lease::kindName(l.kind);
  body["outcome"]["wait_status_from"] = "client";
  if (commandOmitted) body["lease"]["command_omitted"] = commandOmitted;
  body["client"] = clientDigest(client);
  return body;
}

void Endings::lost(Lease& l, const std::string& why) {
  lease::LeaseRecord rec = baseRecord(l);
  rec.manager = l.isAttach() ? "attached" : "client";
  if (l.metering().meter) {
    rec.host = l.metering().meter->host();
    rec.gpu = l.metering().meter->gpu();
  } else if (l.ending().recovered) {
    // This daemon never metered it; the samples taken before the restart
    // are summarised from the ledger below ("ledger_samples").
    rec.host.lastError = "not sampled since the daemon restarted; see ledger_samples";
    rec.gpu.lastError = rec.host.lastError;
  }
  rec.counters = finalCounters(env_.cgroupRoot, l);
  rec.outcome.cls = lease::OutcomeClass::Lost;
  rec.outcome.hasExitStatus = false;
  rec.outcome.summary = "how the workload ended is unknown: " + why;
  if (rec.counters.events) rec.outcome.oomKills = rec.counters.events->get("oom_kill");
  json body = lease::recordJson(rec);
  body["lease"]["kind"] = lease::kindName(l.kind);
  // The samples the ledger kept are facts too: their peaks, from the ledger.
  if (auto samples = ledger_.samples(l.id); samples && !samples->empty()) {
    std::optional<std::uint64_t> mem, gpu;
    for (const auto& s : *samples) {
      if (s.memoryCurrent && (!mem || *s.memoryCurrent > *mem)) mem = s.memoryCurrent;
      if (s.gpuBytes && (!gpu || *s.gpuBytes > *gpu)) gpu = s.gpuBytes;
    }
    body["ledger_samples"] = {{"count", samples->size()},
                              {"memory_current_peak_bytes", jsonview::orNull(mem)},
                              {"gpu_peak_bytes", jsonview::orNull(gpu)},
                              {"first_at_ns", samples->front().atNs},
                              {"last_at_ns", samples->back().atNs}};
  }
  stopLeaseSlice(l);
  end(l, ledger::kLost, body, lease::outcomeClassName(lease::OutcomeClass::Lost));
}

void Endings::withdraw(Lease& l, const std::string& reason, const std::string& cls) {
  end(l, ledger::kWithdrawn, ledger::encode(ledger::WithdrawnRow{reason}), cls);
}

// A run lease's client makes and removes its slice (<parent>-<id>.slice,
// lease::leaseSliceName); a client killed before it could leaves the slice
// behind, active and empty. Only that slice is stopped: its name carries the
// lease id and it is the parent of the lease's cgroup.
void Endings::stopLeaseSlice(const Lease& l) {
  if (!l.isRun() || !env_.units || l.place.countersCgroup.empty() ||
      l.place.countersCgroup == l.place.cgroup)
    return;
  std::string slice(fs::baseName(l.place.countersCgroup));
  if (!text::endsWith(slice, l.id + ".slice") ||
      fs::parentPath(l.place.cgroup) != l.place.countersCgroup)
    return;
  if (auto s = env_.units->stopUnit(slice); !s) {
    events_.note(
        4, fmt::format("lease {}: could not stop its slice {}: {}", l.id, slice, s.error().message),
        {{"TALLY_LEASE", l.id}});
  }
}

void Endings::requestStop(Lease& l) {
  // The scope's processes get SIGTERM now and SIGKILL (cgroup.kill) after the
  // same grace systemd gives a stopping scope.
  if (l.place.cg) {
    if (auto procs = l.place.cg->procs()) {
      for (pid_t pid : *procs) {
        if (pid > 1) ::kill(pid, SIGTERM);
      }
    }
  }
  l.requestKill(clock::monotonicUs());
}

void Endings::expireStops(std::uint64_t nowUs) {
  for (const auto& [id, l] : book_.all()) {
    if (!l->killDue(nowUs)) continue;
    l->killSent();
    if (l->place.cg && populated(*l)) {
      if (auto s = l->place.cg->kill(); !s)
        events_.note(LOG_ERR, fmt::format("lease {}: {}", id, s.error().message),
                     {{"TALLY_LEASE", id}});
    }
  }
}

void Endings::expireGraces(std::uint64_t nowUs) {
  std::vector<std::string> lostIds, stuck;
  for (const auto& [id, l] : book_.all()) {
    if (!l->graceOver(nowUs)) continue;
    if (l->state() == Lease::State::Granted)
      stuck.push_back(id);
    else if (l->state() == Lease::State::Running && (!l->isRun() || !populated(*l)))
      lostIds.push_back(id);
    else
      l->endGrace();  // still running without its client: it may resume later
  }
  for (const auto& id : stuck) {
    if (Lease* l = book_.find(id)) withdraw(*l, "the client went away before the workload started");
  }
  for (const auto& id : lostIds) {
    if (Lease* l = book_.find(id))
      lost(*l,
           "the workload ended while its client was away and it never reported (no wait status)");
  }
}

}  // namespace tally::daemon
