// `tally logs ID`: a detached job's output, from the journal.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "cli/cmd_client.h"

namespace tally::cli {

struct LogsOptions : DaemonCallOptions {
  std::string leaseId;
  bool follow = false;
  std::uint64_t lines = 0;  // 0: all of them
};

CLI::App* addLogsCommand(CLI::App& app, LogsOptions& opts);
int runLogs(const LogsOptions& opts);

}  // namespace tally::cli
