// tally lease show: a live lease from the daemon, or an ended one from the
// ledger; its lines and its memory timeline.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <optional>

#include "cli/cmd_client.h"
#include "cli/cmd_lease_show.h"
#include "cli/exit_codes.h"
#include "ledger/ledger.h"
#include "ledger/rows.h"
#include "util/clock.h"
#include "util/json_view.h"
#include "util/text.h"
#include "util/units.h"
#include "views/ledger_view.h"

namespace tally::cli {

using json = nlohmann::json;
using jsonview::bytesOrDash;

// How long ago `ns` was (CLOCK_REALTIME), or "-".
std::string ageText(const json& ns) {
  auto then = jsonview::count(ns);
  return then ? jsonview::spanText(*then, clock::realtimeNs()) : std::string("-");
}

// A lease from the local ledger: its rows, as the daemon's "lease" reply has them.
std::optional<std::pair<json, std::string>> leaseFromLedger(const LeaseShowOptions& o) {
  std::string dir = o.stateDir.empty() ? ledger::defaultStateDir() : o.stateDir;
  auto db = ledger::Ledger::openExisting(dir);
  if (!db) return std::nullopt;
  // An id given short names the one lease it begins (as the daemon takes it).
  std::string id = o.leaseId;
  auto ids = o.leaseId.size() >= 4 ? db->leaseIdsStartingWith(o.leaseId, 4)
                                   : Result<std::vector<std::string>>(std::vector<std::string>{});
  if (ids && ids->size() > 1) {
    fmt::print(stderr,
               "tally lease show: lease id {} is the start of several leases in the ledger at {} "
               "({}): give more of it\n",
               o.leaseId, db->path(), fmt::join(*ids, ", "));
    return std::nullopt;
  } else if (ids && ids->size() == 1) {
    id = ids->front();
  }
  auto events = db->events(id);
  if (!events || events->empty()) {
    fmt::print(stderr, "tally lease show: no lease {} in the ledger at {} either\n", o.leaseId,
               db->path());
    return std::nullopt;
  }
  return std::pair{json{{"lease", id},
                        {"state", "ended"},
                        {"ledger", ledger::eventRowsJson(*events)},
                        {"samples", ledger::chartSamplesJson(*db, id)}},
                   db->path()};
}

namespace {

std::string limitsText(const json& declared) {
  std::vector<std::string> parts;
  for (auto [key, name] :
       {std::pair{"memory_max", "MemoryMax"}, std::pair{"memory_high", "MemoryHigh"},
        std::pair{"gpu_memory_max", "gpu_memory_max"},
        std::pair{"gpu_memory_high", "gpu_memory_high"}}) {
    if (declared.is_object() && declared.contains(key) && declared[key].is_number_unsigned())
      parts.push_back(fmt::format("{}={}", name, bytesOrDash(declared[key])));
  }
  return parts.empty() ? "no limits declared" : fmt::format("{}", fmt::join(parts, ", "));
}

// The declared limits: the live lease's, else its granted row's, else its record's.
json declaredOf(const json& r) {
  if (r.contains("declared") && r["declared"].is_object()) return r["declared"];
  if (r.contains("ledger") && r["ledger"].is_array()) {
    for (const auto& e : r["ledger"]) {
      const json& body = e.contains("body") ? e["body"] : json();
      if (body.is_object() && body.contains("declared") && body["declared"].is_object())
        return body["declared"];
    }
  }
  return json::object();
}

std::optional<std::uint64_t> u64Of(const json& j, const char* key) {
  if (j.is_object() && j.contains(key) && j[key].is_number_unsigned())
    return j[key].get<std::uint64_t>();
  return std::nullopt;
}

}  // namespace

LeaseTimeline leaseTimeline(const json& r) {
  LeaseTimeline t;
  json declared = declaredOf(r);
  t.host.label = "host memory (cgroup memory.current)";
  t.host.limit = u64Of(declared, "memory_max");
  t.host.limitName = "MemoryMax";
  t.gpu.label = "GPU memory (device + host-uncharged, DRM fdinfo)";
  t.gpu.limit = u64Of(declared, "gpu_memory_max");
  t.gpu.limitName = "gpu_memory_max";
  if (r.contains("samples") && r["samples"].is_array()) {
    for (const auto& s : r["samples"]) {
      auto at = u64Of(s, "at_ns");
      if (!at) continue;
      t.host.points.push_back({*at, u64Of(s, "memory_bytes")});
      t.gpu.points.push_back({*at, u64Of(s, "gpu_bytes")});
    }
  }
  if (r.contains("ledger") && r["ledger"].is_array()) {
    for (const auto& e : r["ledger"]) {
      const json& body = e.contains("body") ? e["body"] : json();
      std::string kind = e.value("kind", "");
      if (kind == "gpu-bound" && body.is_object()) {
        std::string what = body.value("kind", "gpu-bound");
        if (what == "gpu-memory-high-cleared") continue;
        t.marks.push_back({u64Of(body, "at_ns").value_or(u64Of(e, "at_ns").value_or(0)), what});
      } else if (kind == "outcome" && body.is_object() && body.contains("outcome") &&
                 body["outcome"].is_object()) {
        t.marks.push_back({u64Of(body, "ended_at_ns").value_or(u64Of(e, "at_ns").value_or(0)),
                           body["outcome"].value("class", "ended")});
      }
    }
  }
  // Which lease and when: the picture names itself (its times are clock
  // times of that day, local as the rest of lease show).
  std::string name = r.value("name", "");
  if (name.empty() && r.contains("ledger") && r["ledger"].is_array())
    for (const auto& e : r["ledger"])
      if (e.value("kind", "") == "granted" && e["body"].is_object() && e["body"].contains("name") &&
          e["body"]["name"].is_string())
        name = e["body"]["name"].get<std::string>();
  std::optional<std::uint64_t> from = !t.host.points.empty()
                                          ? std::optional<std::uint64_t>(t.host.points.front().atNs)
                                          : std::nullopt;
  t.title =
      fmt::format("lease {}{}{}", r.value("lease", "?"), name.empty() ? "" : " (" + name + ")",
                  from ? ", from " + views::wallTime(*from, false) : std::string());
  return t;
}

std::vector<std::string> leaseShowLines(const json& r) {
  std::vector<std::string> out;
  // An ended lease: what its outcome record says.
  const json* outcome = nullptr;
  if (r.contains("ledger") && r["ledger"].is_array()) {
    for (const auto& e : r["ledger"])
      if (e.value("kind", "") == "outcome" && e["body"].is_object()) outcome = &e["body"];
  }
  std::string name = r.value("name", "");
  std::string kind = r.value("kind", "");
  if (outcome && name.empty() && (*outcome)["lease"].is_object())
    name = (*outcome)["lease"].value("name", "-");
  if (outcome && kind.empty() && (*outcome)["lease"].is_object())
    kind = (*outcome)["lease"].value("kind", "run");
  out.push_back(fmt::format("lease {} ({}, {}): {}", r.value("lease", ""),
                            name.empty() ? "-" : name, kind.empty() ? "-" : kind,
                            r.value("state", "?")));
  if (r.contains("pools") && r["pools"].is_array() && !r["pools"].empty()) {
    std::vector<std::string> pools;
    for (const auto& p : r["pools"]) pools.push_back(p.is_string() ? p.get<std::string>() : "?");
    out.push_back(fmt::format(
        "  pools {}; {}; age {}", fmt::join(pools, ","),
        limitsText(r.value("declared", json::object())),
        ageText(r.contains("started_at_ns") ? r["started_at_ns"] : r["requested_at_ns"])));
  }
  if (r.contains("attributes") && r["attributes"].is_object() && !r["attributes"].empty()) {
    std::vector<std::string> attrs;
    for (const auto& [k, v] : r["attributes"].items())
      attrs.push_back(fmt::format("{}={}", k, v.is_string() ? v.get<std::string>() : v.dump()));
    out.push_back(fmt::format("  attributes {}", fmt::join(attrs, " ")));
  }
  if (r.contains("cgroup") && r["cgroup"].is_string())
    out.push_back(fmt::format("  cgroup {}{}", r["cgroup"].get<std::string>(),
                              r.contains("unit") && r["unit"].is_string()
                                  ? fmt::format(" (unit {})", r["unit"].get<std::string>())
                                  : ""));
  if (r.contains("memory"))
    out.push_back(fmt::format("  memory now {}, sampled peak {} (cgroup)",
                              bytesOrDash(r["memory"]["current_bytes"]),
                              bytesOrDash(r["memory"]["peak_sampled_bytes"])));
  if (r.contains("gpu") && r["gpu"].is_object()) {
    const json& g = r["gpu"];
    std::string line = fmt::format(
        "  GPU memory now {}, peak {} ({})", bytesOrDash(g.value("current_bytes", json())),
        bytesOrDash(g.value("peak_bytes", json())), g.value("source", std::string("drm-fdinfo")));
    // Where the kernel charges the lease: fdinfo beside it, and what it refused.
    if (g.contains("allocations_refused"))
      line +=
          fmt::format("; fdinfo {}; {} refused ({})", bytesOrDash(g.value("fdinfo_bytes", json())),
                      text::counted(g.value("allocations_refused", std::uint64_t{0}), "allocation",
                                    "allocations"),
                      bytesOrDash(g.value("refused_bytes", json())));
    out.push_back(line);
  }
  if (outcome) {
    const json& rec = *outcome;
    const json& oc = rec.value("outcome", json::object());
    out.push_back(fmt::format("  outcome {}: {}", oc.value("class", "?"), oc.value("summary", "")));
    std::uint64_t start = rec.value("started_at_ns", std::uint64_t{0});
    std::uint64_t end = rec.value("ended_at_ns", std::uint64_t{0});
    json declared = json::object();
    if (rec.contains("declared") && rec["declared"].is_object()) declared = rec["declared"];
    out.push_back(fmt::format(
        "  ran {}; {}; memory peak {}; GPU peak {}",
        end >= start && start ? fmt::format("{} s", (end - start) / 1000000000u)
                              : std::string("for an unknown time"),
        limitsText(declared),
        bytesOrDash(rec.contains("memory") ? rec["memory"].value("peak_bytes", json()) : json()),
        bytesOrDash(rec.contains("gpu") ? rec["gpu"].value("peak_bytes", json()) : json())));
  }
  if (r.contains("ledger") && r["ledger"].is_array()) {
    for (const auto& e : r["ledger"]) {
      std::string extra;
      if (e["body"].is_object() && e["body"].contains("outcome") &&
          e["body"]["outcome"].is_object())
        extra = ": " + e["body"]["outcome"].value("summary", "");
      out.push_back(fmt::format("  ledger #{} {}{}", e.value("seq", std::int64_t{0}),
                                e.value("kind", "?"), extra));
    }
    // The daemon sends a lease's first and newest rows, and counts the rest.
    if (auto omitted = jsonview::count(jsonview::get(r, "ledger_omitted")); omitted && *omitted)
      out.push_back(
          fmt::format("  ({} more ledger rows of this lease between its first and its "
                      "newest are not shown; `tally ledger export` has them all)",
                      *omitted));
  }
  return out;
}

}  // namespace tally::cli
