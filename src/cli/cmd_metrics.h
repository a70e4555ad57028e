// `tally metrics`: the daemon's metrics in the Prometheus text format.
#pragma once

#include <CLI/CLI.hpp>

#include "cli/cmd_client.h"

namespace tally::cli {

struct MetricsOptions : DaemonCallOptions {};

CLI::App* addMetricsCommand(CLI::App& app, MetricsOptions& opts);
int runMetrics(const MetricsOptions& opts);

}  // namespace tally::cli
