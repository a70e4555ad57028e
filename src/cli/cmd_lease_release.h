// `tally lease release ID`: end a lease (its owner or root).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "cli/cmd_client.h"

namespace tally::cli {

struct LeaseReleaseOptions : DaemonCallOptions {
  std::string leaseId;
  bool json = false;
};

// Under `tally lease` (its parent: `lease`).
CLI::App* addLeaseReleaseCommand(CLI::App& lease, LeaseReleaseOptions& opts);
int runLeaseRelease(const LeaseReleaseOptions& opts);

}  // namespace tally::cli
