// `tally daemon status`: what the running daemon says of itself.
#pragma once

#include <CLI/CLI.hpp>

#include "cli/cmd_client.h"

namespace tally::cli {

struct DaemonStatusOptions : DaemonCallOptions {
  bool json = false;
  bool utc = false;
};

// Under `tally daemon` (added before it, by addDaemonCommand); nullptr without it.
CLI::App* addDaemonStatusCommand(CLI::App& app, DaemonStatusOptions& opts);
int runDaemonStatus(const DaemonStatusOptions& opts);

}  // namespace tally::cli
