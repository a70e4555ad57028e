#include "daemon/journal.h"

#include <sys/uio.h>
#include <unistd.h>
#include <systemd/sd-journal.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tally::daemon {

JournalEntry boundEventEntry(const std::string& lease, const std::string& name, const enforce::BoundEvent& e) {
  bool acted = e.kind == enforce::Verdict::Kill || e.kind == enforce::Verdict::Report;
  return {acted ? 4 : 5, fmt::format("lease {} ({}): {}", lease, name, e.summary),
          {{"TALLY_LEASE", lease}, {"TALLY_LEASE_NAME", name}, {"TALLY_EVENT", enforce::verdictName(e.kind)},
           {"TALLY_GPU_BYTES", std::to_string(e.bytes)}, {"TALLY_LIMIT_BYTES", std::to_string(e.limit)}}};
}

namespace {

std::string number(const nlohmann::json& j) {
  return j.is_number_integer() ? std::to_string(j.get<std::int64_t>()) : std::string();
}

const nlohmann::json& at(const nlohmann::json& j, const char* a, const char* b) {
  static const nlohmann::json kNull;
  if (!j.is_object() || !j.contains(a) || !j[a].is_object() || !j[a].contains(b)) return kNull;
  return j[a][b];
}

}  // namespace

JournalEntry lifecycleEntry(const std::string& kind, const std::string& lease, const std::string& name,
                            const std::vector<std::string>& pools, const nlohmann::json& body) {
  JournalEntry e;
  e.priority = 6;
  e.fields = {{"TALLY_EVENT", "lease-" + kind}, {"TALLY_LEASE", lease}, {"TALLY_LEASE_NAME", name}};
  std::string poolList = fmt::format("{}", fmt::join(pools, ","));
  if (!poolList.empty()) e.fields.emplace_back("TALLY_POOL", poolList);
  auto text = [&](const nlohmann::json& j, const char* key) -> std::string {
    return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
  };
  // A started/adopted row names the cgroup at top level; a record nests it under "lease".
  const nlohmann::json& where = body.is_object() && body.contains("lease") && body["lease"].is_object() ? body["lease"] : body;
  if (auto u = text(where, "unit"); !u.empty()) e.fields.emplace_back("TALLY_UNIT", u);
  if (auto c = text(where, "cgroup"); !c.empty()) e.fields.emplace_back("TALLY_CGROUP", c);
  std::string who = fmt::format("lease {} ({})", lease, name);
  bool end = kind == "outcome" || kind == "lost" || kind == "withdrawn";
  if (!end) {
    if (kind == "granted") e.message = fmt::format("{}: granted{}", who, poolList.empty() ? "" : " in " + poolList);
    else if (kind == "started" || kind == "adopted" || kind == "readopted")
      e.message = fmt::format("{}: {} in {}", who, kind, text(where, "cgroup").empty() ? "?" : text(where, "cgroup"));
    else e.message = fmt::format("{}: {}", who, kind);
    return e;
  }
  const nlohmann::json& clsJson = at(body, "outcome", "class");
  std::string cls = kind != "outcome" ? kind : clsJson.is_string() ? clsJson.get<std::string>() : "unknown";
  e.fields.emplace_back("TALLY_OUTCOME", cls);
  auto put = [&](const char* field, const nlohmann::json& v) {
    if (auto n = number(v); !n.empty()) e.fields.emplace_back(field, n);
  };
  put("TALLY_EXIT_CODE", at(body, "outcome", "exit_code"));
  put("TALLY_MEMORY_PEAK_BYTES", at(body, "memory", "peak_bytes"));
  put("TALLY_GPU_PEAK_BYTES", at(body, "gpu", "peak_bytes"));
  put("TALLY_OOM_KILLS", at(body, "outcome", "oom_kill"));
  const nlohmann::json& summaryJson = at(body, "outcome", "summary");
  std::string summary = summaryJson.is_string() ? summaryJson.get<std::string>() : text(body, "reason");
  e.message = fmt::format("{}: {}{}", who, cls, summary.empty() ? "" : ": " + summary);
  // A clean end is info; a non-zero exit or a stop a notice; a kill, an OOM, a loss a warning.
  const nlohmann::json& code = at(body, "outcome", "exit_code");
  bool clean = cls == "ended" || cls == "released" || (cls == "exited" && code.is_number_integer() && code.get<std::int64_t>() == 0);
  e.priority = clean ? 6 : cls == "exited" || cls == "stopped" || cls == "withdrawn" ? 5 : 4;
  return e;
}

void SdJournal::note(int priority, const std::string& message,
                     const std::vector<std::pair<std::string, std::string>>& fields) {
  std::vector<std::string> lines;
  lines.reserve(fields.size() + 3);
  lines.push_back("MESSAGE=" + prefix_ + message);
  lines.push_back(fmt::format("PRIORITY={}", priority));
  lines.push_back("SYSLOG_IDENTIFIER=tally");
  for (const auto& [key, value] : fields) lines.push_back(key + "=" + value);
  std::vector<iovec> iov;
  iov.reserve(lines.size());
  for (auto& l : lines) iov.push_back({l.data(), l.size()});
  // sd_journal_sendv() succeeds silently when journald is absent (ENOENT on
  // its socket is "fail silently" by design), so whether it listens is asked
  // of the socket itself: without it the message goes to stderr instead.
  static const bool journald = ::access("/run/systemd/journal/socket", W_OK) == 0;
  if ((!journald || sd_journal_sendv(iov.data(), static_cast<int>(iov.size())) < 0) && stderrFallback_) {
    fmt::print(stderr, "{}{}\n", prefix_, message);
  }
}

}  // namespace tally::daemon
