// What changed between two configs, setting by setting, as a reload says
// it: "pools.gpu.gpu_memory_budget 48.0 GiB -> 64.0 GiB", "pools.batch
// added", "leases.llm removed". Values in the units `config check` shows
// (sizes, systemd timespans). Pure: two parsed configs in, lines out.
#pragma once

#include <string>
#include <vector>

#include "config/config.h"

namespace tally::config {

struct Changes {
  std::vector<std::string> daemon;  // [daemon] keys
  std::vector<std::string> pools;   // [pools.*], a pool added or removed as one line
  std::vector<std::string> leases;  // [leases.*], likewise
  bool empty() const { return daemon.empty() && pools.empty() && leases.empty(); }
};

// Both configs' state_dir as the daemon uses it (the default filled in).
Changes differences(const Config& before, const Config& after);

}  // namespace tally::config
