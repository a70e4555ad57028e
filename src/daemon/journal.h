// The daemon's Journal seam over sd-journal: structured fields when journald
// listens, stderr otherwise (a host without systemd, a test run).
#pragma once

#include "daemon/seams.h"

namespace tally::daemon {

class SdJournal final : public Journal {
 public:
  // `stderrFallback` false: a caller that already printed the message (tally
  // run) wants only the journal copy.
  explicit SdJournal(bool stderrFallback = true, std::string prefix = "tally daemon: ")
      : stderrFallback_(stderrFallback), prefix_(std::move(prefix)) {}
  void note(int priority, const std::string& message,
            const std::vector<std::pair<std::string, std::string>>& fields) override;

 private:
  bool stderrFallback_;
  std::string prefix_;
};

}  // namespace tally::daemon
