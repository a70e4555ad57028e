// `tally leases`: the daemon's live and queued leases.
#pragma once

#include <CLI/CLI.hpp>

#include "cli/cmd_client.h"

namespace tally::cli {

struct LeasesOptions : DaemonCallOptions {
  bool json = false;
  std::string user;  // --user: only this user's leases (a name or a uid)
};

CLI::App* addLeasesCommand(CLI::App& app, LeasesOptions& opts);
int runLeases(const LeasesOptions& opts);

}  // namespace tally::cli
