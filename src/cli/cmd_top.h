// `tally top`: the daemon's overview as a live terminal view.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace tally::cli {

struct TopOptions {
  std::string socket;
  std::string interval = "1s";
  bool once = false;
};

void addTopCommand(CLI::App& app, TopOptions& opts);
int runTop(const TopOptions& opts);

}  // namespace tally::cli
