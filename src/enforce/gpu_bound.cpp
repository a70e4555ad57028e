#include "enforce/gpu_bound.h"

#include <fmt/format.h>

#include "util/units.h"

namespace tally::enforce {

const char* actionName(Action a) {
  switch (a) {
    case Action::Refuse:
      return "refuse";
    case Action::Kill:
      return "kill";
    case Action::Report:
      return "report";
  }
  return "report";
}

std::optional<Action> parseAction(const std::string& text) {
  for (Action a : kActions)
    if (text == actionName(a)) return a;
  return std::nullopt;
}

std::vector<std::string> actionNames() {
  std::vector<std::string> names;
  for (Action a : kActions) names.emplace_back(actionName(a));
  return names;
}

std::string actionChoices() {
  std::string out;
  const std::size_t n = std::size(kActions);
  for (std::size_t i = 0; i < n; ++i)
    out += fmt::format("{}\"{}\"",
                       i == 0       ? ""
                       : i + 1 == n ? " or "
                                    : ", ",
                       actionName(kActions[i]));
  return out;
}

const char* verdictName(Verdict v) {
  switch (v) {
    case Verdict::None:
      return "none";
    case Verdict::HighCrossed:
      return "gpu-memory-high";
    case Verdict::HighCleared:
      return "gpu-memory-high-cleared";
    case Verdict::Over:
      return "gpu-memory-over";
    case Verdict::Kill:
      return "gpu-memory-kill";
    case Verdict::Report:
      return "gpu-memory-max-exceeded";
    case Verdict::Refused:
      return "refused";
    case Verdict::KillFailed:
      return "gpu-memory-kill-failed";
  }
  return "?";
}

std::vector<BoundEvent> eventsOf(const Decision& d, std::uint64_t nowNs) {
  std::vector<BoundEvent> out;
  if (d.high != Verdict::None)
    out.push_back({nowNs, d.high, d.bytes, d.highLimit, 0, 0, d.highSummary});
  if (d.verdict == Verdict::Kill || d.verdict == Verdict::Report) {
    out.push_back({nowNs, d.verdict, d.bytes, d.limit, d.samples, d.firstOverNs, d.summary});
  }
  return out;
}

nlohmann::ordered_json boundEventJson(const BoundEvent& e) {
  nlohmann::ordered_json j = {
      {"at_ns", e.atNs}, {"kind", verdictName(e.kind)}, {"bytes", e.bytes}, {"limit", e.limit}};
  if (e.samples) j["samples"] = e.samples;
  if (e.firstOverNs) j["first_over_ns"] = e.firstOverNs;
  j["summary"] = e.summary;
  return j;
}

Result<BoundEvent> boundEventFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return Error{0, "a GPU bound event must be an object"};
  BoundEvent e;
  auto text = [&](const char* key, std::string& out) -> Status {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return Ok{};
    if (!it->is_string()) return Error{0, fmt::format("\"{}\" is not a string", key)};
    out = it->get<std::string>();
    return Ok{};
  };
  auto count = [&](const char* key, std::uint64_t& out) -> Status {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return Ok{};
    if (!it->is_number_unsigned())
      return Error{0, fmt::format("\"{}\" is not a non-negative integer", key)};
    out = it->get<std::uint64_t>();
    return Ok{};
  };
  std::string kind;
  if (auto s = text("kind", kind); !s) return s.error();
  bool known = false;
  for (auto v : kBoundEventKinds) {
    if (kind == verdictName(v)) {
      e.kind = v;
      known = true;
    }
  }
  if (kind == verdictName(Verdict::Refused)) {
    e.kind = Verdict::Refused;
    known = true;
  }
  if (!known) return Error{0, "\"kind\" is not a GPU bound event kind"};
  std::uint64_t samples = 0;
  for (auto [key, out] :
       {std::pair{"at_ns", &e.atNs}, std::pair{"bytes", &e.bytes}, std::pair{"limit", &e.limit},
        std::pair{"first_over_ns", &e.firstOverNs}, std::pair{"samples", &samples}}) {
    if (auto s = count(key, *out); !s) return s.error();
  }
  if (samples > 1'000'000) return Error{0, "\"samples\" is implausibly large"};
  e.samples = static_cast<unsigned>(samples);
  if (auto s = text("summary", e.summary); !s) return s.error();
  return e;
}

nlohmann::ordered_json boundEventsJson(const std::vector<BoundEvent>& events) {
  auto a = nlohmann::ordered_json::array();
  for (const auto& e : events) a.push_back(boundEventJson(e));
  return a;
}

Decision observe(const GpuBound& bound, GpuBoundState& state, std::optional<std::uint64_t> bytes,
                 const std::string& source, std::uint64_t nowNs) {
  Decision d;
  if (!bytes) return d;  // nothing read: neither evidence for nor against
  d.bytes = *bytes;
  if (bound.high) {
    d.highLimit = *bound.high;
    if (*bytes > *bound.high && !state.highRaised) {
      state.highRaised = true;
      d.high = Verdict::HighCrossed;
      d.highSummary =
          fmt::format("GPU memory {} above gpu_memory_high {} ({})", units::humanBytes(*bytes),
                      units::humanBytes(*bound.high), source);
    } else if (*bytes <= *bound.high && state.highRaised) {
      state.highRaised = false;
      d.high = Verdict::HighCleared;
      d.highSummary =
          fmt::format("GPU memory {} back under gpu_memory_high {} ({})", units::humanBytes(*bytes),
                      units::humanBytes(*bound.high), source);
    }
  }
  if (!bound.max || state.acted) return d;
  if (*bytes <= *bound.max) {
    state.overRun = 0;
    state.killFailureSaid.clear();
    return d;
  }
  if (state.overRun++ == 0) state.firstOverNs = nowNs;
  d.verdict = Verdict::Over;
  d.limit = *bound.max;
  d.samples = state.overRun;
  d.firstOverNs = state.firstOverNs;
  if (state.overRun < std::max(1u, bound.consecutive)) return d;
  state.acted = true;
  std::string figures =
      fmt::format("GPU memory {} over gpu_memory_max {} ({}, {} sample{} at {})",
                  units::humanBytes(*bytes), units::humanBytes(*bound.max), source, state.overRun,
                  state.overRun == 1 ? "" : "s", units::humanDuration(bound.sampleIntervalUs));
  d.verdict = killsOverBound(bound.action) ? Verdict::Kill : Verdict::Report;
  d.summary = killsOverBound(bound.action) ? "killed by tally: " + figures
                                           : "over its GPU memory bound (report only): " + figures;
  return d;
}

Step step(const GpuBound& bound, GpuBoundState& state, std::optional<std::uint64_t> bytes,
          const std::string& source, std::uint64_t nowNs) {
  Step s;
  auto d = observe(bound, state, bytes, source, nowNs);
  s.events = eventsOf(d, nowNs);
  if (d.verdict == Verdict::Kill) {
    s.kill = true;
    s.killSummary = d.summary;
  }
  return s;
}

std::optional<std::string> drive(const GpuBound& bound, GpuBoundState& state,
                                 std::optional<std::uint64_t> bytes, const std::string& source,
                                 std::uint64_t nowNs, const BoundSeams& seams) {
  auto s = step(bound, state, bytes, source, nowNs);
  std::optional<std::string> killed;
  std::optional<std::string> killFailedWhy;
  if (s.kill) {
    if (Status k = seams.kill(); k) {
      killed = s.killSummary;
    } else {
      killFailed(state);
      killFailedWhy = k.error().message;
      if (seams.killFailed) seams.killFailed(k.error().message);
    }
  }
  for (const auto& e : s.events) {
    if (killFailedWhy && e.kind == Verdict::Kill) {
      // Not done: not recorded as done. Said once per run over the bound
      // and reason (a placed job's "no child" becomes a child's EPERM):
      // it is tried again at every sample while it stays over.
      if (state.killFailureSaid == *killFailedWhy) continue;
      state.killFailureSaid = *killFailedWhy;
      BoundEvent failed = e;
      failed.kind = Verdict::KillFailed;
      constexpr std::string_view kKilled = "killed by tally: ";
      std::string_view figures = e.summary;
      if (figures.substr(0, kKilled.size()) == kKilled) figures.remove_prefix(kKilled.size());
      failed.summary = fmt::format("could not kill it over its gpu_memory_max: {} ({})",
                                   *killFailedWhy, figures);
      seams.record(failed);
      continue;
    }
    seams.record(e);
  }
  return killed;
}

}  // namespace tally::enforce
