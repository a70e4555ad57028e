// `tally events` as a person reads it, like `docker events`: one line per event
// with its time, and the filters (--lease, --pool, --kind). Pure: events come in
// as the daemon's JSON, lines and verdicts go out; cli/cmd_events.cpp does the I/O.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "util/result.h"

namespace tally::views {

// What --kind matches: a lease event's kind (queued, granted, started,
// adopted, readopted, released, outcome, lost, withdrawn), a GPU bound
// event's (gpu-memory-high, gpu-memory-high-cleared, gpu-memory-kill,
// gpu-memory-max-exceeded, refused), or "coverage".
std::string eventKind(const nlohmann::json& event);
// Every kind eventKind() can name, for --kind's help and its refusal.
const std::vector<std::string>& eventKinds();

struct EventFilter {
  std::vector<std::string> leases;       // a lease id, its first characters, or a lease name
  std::vector<std::string> pools;        // a pool the lease holds (lease events say theirs)
  std::vector<std::string> kinds;        // eventKinds()
  std::optional<std::uint32_t> owner{};  // whose leases (uid); events that name none never match
};
// Checks the filter's kinds: an unknown kind is refused with the list.
Status checkFilter(const EventFilter& f);
// Each list given must match (any of its entries); an empty list matches all.
// A pool filter matches only events that name their pools (lease events);
// an owner filter only events that name their owner (lease and GPU bound events).
bool matches(const EventFilter& f, const nlohmann::json& event);

// "2026-12-02 15:30:01.123  lease 1f0c2a9b3e7d (llama): granted in gpu", in
// local time (UTC with `utc`); "-" for the time of an event that carries none
// (an older daemon). Replayed events (from the ledger) read the same.
std::string eventLine(const nlohmann::json& event, bool utc);

}  // namespace tally::views
