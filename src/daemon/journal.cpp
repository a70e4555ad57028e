#include "daemon/journal.h"

#include <sys/uio.h>
#include <systemd/sd-journal.h>

#include <fmt/format.h>

namespace tally::daemon {

JournalEntry boundEventEntry(const std::string& lease, const std::string& name, const enforce::BoundEvent& e) {
  bool acted = e.kind == enforce::Verdict::Kill || e.kind == enforce::Verdict::Report;
  return {acted ? 4 : 5, fmt::format("lease {} ({}): {}", lease, name, e.summary),
          {{"TALLY_LEASE", lease}, {"TALLY_LEASE_NAME", name}, {"TALLY_EVENT", enforce::verdictName(e.kind)},
           {"TALLY_GPU_BYTES", std::to_string(e.bytes)}, {"TALLY_LIMIT_BYTES", std::to_string(e.limit)}}};
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
  // No journald socket (no systemd here): the message still reaches the operator.
  if (sd_journal_sendv(iov.data(), static_cast<int>(iov.size())) < 0 && stderrFallback_) fmt::print(stderr, "{}{}\n", prefix_, message);
}

}  // namespace tally::daemon
