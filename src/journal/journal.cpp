#include "journal/journal.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/uio.h>
// The journal entries are the operator's: no CODE_FILE/CODE_LINE/CODE_FUNC of
// this source tree (sd_journal_sendv adds them unless told not to).
#define SD_JOURNAL_SUPPRESS_LOCATION 1
#include <systemd/sd-journal.h>
#include <unistd.h>

#include "lease/outcome.h"
#include "ledger/kinds.h"
#include "util/clean_text.h"
#include "util/json_view.h"

namespace tally::journal {

JournalEntry boundEventEntry(const std::string& lease, const std::string& name,
                             const enforce::BoundEvent& e) {
  bool acted = e.kind == enforce::Verdict::Kill || e.kind == enforce::Verdict::Report;
  // A bound that could not act is an error: the workload runs on over it.
  return {e.kind == enforce::Verdict::KillFailed ? 3
          : acted                                ? 4
                                                 : 5,
          fmt::format("lease {} ({}): {}", lease, name, e.summary),
          {{"TALLY_LEASE", lease},
           {"TALLY_LEASE_NAME", name},
           {"TALLY_EVENT", enforce::verdictName(e.kind)},
           {"TALLY_GPU_BYTES", std::to_string(e.bytes)},
           {"TALLY_LIMIT_BYTES", std::to_string(e.limit)}}};
}

JournalEntry lifecycleEntry(const std::string& kind, const std::string& lease,
                            const std::string& name, const std::vector<std::string>& pools,
                            const nlohmann::json& body,
                            const std::map<std::string, std::string>& attributes,
                            const VerifiedPlace& place) {
  using jsonview::get;
  using jsonview::text;
  JournalEntry e;
  e.priority = 6;
  e.fields = {{"TALLY_EVENT", "lease-" + kind}, {"TALLY_LEASE", lease}, {"TALLY_LEASE_NAME", name}};
  std::string poolList = fmt::format("{}", fmt::join(pools, ","));
  if (!poolList.empty()) e.fields.emplace_back("TALLY_POOL", poolList);
  for (const auto& [key, value] : attributes) {
    // Keys are [a-z][a-z0-9_]*: upper-cased, a valid journal field name.
    std::string field = "TALLY_ATTR_";
    for (char c : key) field += static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
    e.fields.emplace_back(std::move(field), value);
  }
  if (!place.unit.empty()) e.fields.emplace_back("TALLY_UNIT", place.unit);
  if (!place.cgroup.empty()) e.fields.emplace_back("TALLY_CGROUP", place.cgroup);
  std::string who = fmt::format("lease {} ({})", lease, name);
  if (!ledger::isTerminal(kind)) {
    if (kind == ledger::kGranted)
      e.message = fmt::format("{}: granted{}", who, poolList.empty() ? "" : " in " + poolList);
    else if (kind == ledger::kStarted || kind == ledger::kAdopted || kind == ledger::kReadopted)
      e.message = fmt::format("{}: {} in {}", who, kind,
                              place.cgroup.empty() ? std::string("?") : place.cgroup);
    else
      e.message = fmt::format("{}: {}", who, kind);
    return e;
  }
  const nlohmann::json& outcome = get(body, "outcome");
  std::string cls = kind != ledger::kOutcome ? kind : text(outcome, "class", "unknown");
  e.fields.emplace_back("TALLY_OUTCOME", cls);
  // A figure the record lacks is left out, never sent as 0.
  auto put = [&](const char* field, const nlohmann::json& v) {
    if (v.is_number_integer()) e.fields.emplace_back(field, std::to_string(v.get<std::int64_t>()));
  };
  put("TALLY_EXIT_CODE", get(outcome, "exit_code"));
  // memory.peak when the kernel's counter could be read at the end; an
  // attached service's cgroup may be gone by then (systemd removes it), and
  // the peak of the samples is then sent under its own name: a lower bound,
  // not the kernel's peak.
  const nlohmann::json& memory = get(body, "memory");
  if (get(memory, "peak_bytes").is_number_integer())
    put("TALLY_MEMORY_PEAK_BYTES", get(memory, "peak_bytes"));
  else
    put("TALLY_MEMORY_PEAK_SAMPLED_BYTES", get(get(memory, "sampled"), "peak_current_bytes"));
  put("TALLY_GPU_PEAK_BYTES", get(get(body, "gpu"), "peak_bytes"));
  put("TALLY_OOM_KILLS", get(outcome, "oom_kill"));
  std::string summary =
      get(outcome, "summary").is_string() ? text(outcome, "summary") : text(body, "reason");
  e.message = fmt::format("{}: {}", who, lease::outcomeWords(cls, summary));
  // A clean end is info; a non-zero exit or a stop a notice; a kill, an OOM, a loss a warning.
  const nlohmann::json& code = get(outcome, "exit_code");
  using lease::OutcomeClass;
  auto c = lease::parseOutcomeClass(cls);  // absent for "withdrawn", which is no outcome class
  bool exitedZero =
      c == OutcomeClass::Exited && code.is_number_integer() && code.get<std::int64_t>() == 0;
  bool clean = c == OutcomeClass::Ended || c == OutcomeClass::Released || exitedZero;
  bool notice =
      c == OutcomeClass::Exited || c == OutcomeClass::Stopped || cls == ledger::kWithdrawn;
  e.priority = clean ? 6 : notice ? 5 : 4;
  return e;
}

void SdJournal::note(int priority, const std::string& message,
                     const std::vector<std::pair<std::string, std::string>>& fields) {
  std::vector<std::string> lines;
  lines.reserve(fields.size() + 3);
  // Names, units, paths and summaries in a message or a field come from
  // clients and the kernel: journalctl shows them on a terminal, printable.
  const std::string shown = text::printable(message);
  lines.push_back("MESSAGE=" + prefix_ + shown);
  lines.push_back(fmt::format("PRIORITY={}", priority));
  lines.push_back("SYSLOG_IDENTIFIER=tally");
  for (const auto& [key, value] : fields) lines.push_back(key + "=" + text::printable(value));
  std::vector<iovec> iov;
  iov.reserve(lines.size());
  for (auto& l : lines) iov.push_back({l.data(), l.size()});
  // sd_journal_sendv() succeeds silently when journald is absent (ENOENT on
  // its socket is "fail silently" by design), so whether it listens is asked
  // of the socket itself: without it the message goes to stderr instead.
  static const bool journald = ::access("/run/systemd/journal/socket", W_OK) == 0;
  if ((!journald || sd_journal_sendv(iov.data(), static_cast<int>(iov.size())) < 0) &&
      stderrFallback_) {
    fmt::print(stderr, "{}{}\n", prefix_, shown);
  }
}

}  // namespace tally::journal
