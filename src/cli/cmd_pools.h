// `tally pools`: holders, queue, budgets declared/used, measured headroom.
#pragma once

#include <CLI/CLI.hpp>

#include "cli/cmd_client.h"

namespace tally::cli {

struct PoolsOptions : DaemonCallOptions {
  bool json = false;
};

CLI::App* addPoolsCommand(CLI::App& app, PoolsOptions& opts);
int runPools(const PoolsOptions& opts);

}  // namespace tally::cli
