// `tally lease show ID`: a lease's state, meters and ledger rows, live or
// ended, from the daemon or, when none answers, from the local ledger.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "cli/cmd_client.h"

namespace tally::cli {

struct LeaseShowOptions : DaemonCallOptions {
  std::string leaseId;
  bool json = false;
  std::string svg;       // write the timeline here too
  std::string stateDir;  // the ledger to read when no daemon answers
};

// Under `tally lease` (its parent: `lease`).
CLI::App* addLeaseShowCommand(CLI::App& lease, LeaseShowOptions& opts);
int runLeaseShow(const LeaseShowOptions& opts);

// A lease from the local ledger, as the daemon's "lease" reply has it, and
// the ledger's path; nullopt after saying why (cli/lease_show.cpp).
std::optional<std::pair<nlohmann::json, std::string>> leaseFromLedger(const LeaseShowOptions& o);

}  // namespace tally::cli
