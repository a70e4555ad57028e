// The daemon's Journal seam over sd-journal: structured fields when journald
// listens, stderr otherwise (a host without systemd, a test run).
#pragma once

#include "daemon/seams.h"

namespace tally::daemon {

class SdJournal final : public Journal {
 public:
  void note(int priority, const std::string& message,
            const std::vector<std::pair<std::string, std::string>>& fields) override;
};

}  // namespace tally::daemon
