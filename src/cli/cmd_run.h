#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "fs/root.h"

namespace tally::cli {

struct RunOptions {
  std::string name;
  std::string memoryMax, memoryHigh, memorySwapMax, gpuMemoryMax;
  std::string oomPolicy = "kill";
  std::string sampleInterval = "1s";
  std::string slice = "tally.slice";
  std::string cgroupParent;
  std::string stateDir;
  bool user = false, system = false, cgroupfs = false, json = false;
  std::vector<std::string> command;
};

void addRunCommand(CLI::App& app, RunOptions& opts);
int runRun(const fs::RootPaths& roots, const RunOptions& opts);

}  // namespace tally::cli
