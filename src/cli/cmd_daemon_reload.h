// `tally daemon reload`: the running daemon reads its config again and says
// what changed, or why nothing did (Service::reload). systemctl reload tally
// runs it (ExecReload), so a refused reload fails the systemctl command.
#pragma once

#include <CLI/CLI.hpp>

#include "cli/cmd_client.h"

namespace tally::cli {

struct DaemonReloadOptions : DaemonCallOptions {};

// Under `tally daemon` (added before it, by addDaemonCommand); nullptr without it.
CLI::App* addDaemonReloadCommand(CLI::App& app, DaemonReloadOptions& opts);
int runDaemonReload(const DaemonReloadOptions& opts);

}  // namespace tally::cli
