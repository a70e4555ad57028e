// `tally seats`: one row per lease: running, host and GPU memory against
// limits, fresh or stale.
#pragma once

#include <CLI/CLI.hpp>

#include "cli/cmd_client.h"

namespace tally::cli {

struct SeatsOptions : DaemonCallOptions {
  bool json = false;
};

CLI::App* addSeatsCommand(CLI::App& app, SeatsOptions& opts);
int runSeats(const SeatsOptions& opts);

}  // namespace tally::cli
