#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <string>

namespace tally::cli {

struct LedgerOptions {
  bool json = false;
  std::size_t limit = 20;  // --last N (--limit is the older spelling)
  std::string since, until, name, outcome, lease, user;
  bool utc = false;
  std::string stateDir;
  std::string config;  // the daemon's config: its [daemon] state_dir
  CLI::App* verify = nullptr;
  CLI::App* exportCmd = nullptr;
  CLI::App* acknowledge = nullptr;
  bool yes = false;  // acknowledge: write the row, not only show what it would accept
};

void addLedgerCommand(CLI::App& app, LedgerOptions& opts);
int runLedger(const LedgerOptions& opts);

}  // namespace tally::cli
