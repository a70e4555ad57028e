#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "enforce/gpu_bound.h"
#include "fs/root.h"

namespace tally::cli {

struct RunOptions {
  std::string name;
  std::string memoryMax, memoryHigh, memorySwapMax, gpuMemoryMax, gpuMemoryHigh;
  std::string gpuAction = enforce::actionName(enforce::kDefaultAction);
  unsigned gpuOverSamples = enforce::kDefaultConsecutive;
  std::string oomPolicy = "kill";
  std::string sampleInterval = "1s";
  std::string slice = "tally.slice";
  std::string cgroupParent;
  std::string stateDir;
  bool user = false, system = false, cgroupfs = false, json = false, quiet = false;
  // Daemon mode (--pool): acquire the lease from the daemon first.
  std::vector<std::string> pools;
  int priority = 0;
  std::string queueTimeout, socket;
  std::string reconnectTimeout = "60s";
  std::vector<std::string> attrs;        // --attr KEY=VALUE
  bool detach = false;                   // --detach: a transient service runs this tally run
  std::vector<std::string> optionWords;  // run's own words before "--", as typed (for --detach)
  std::vector<std::string> command;
};

void addRunCommand(CLI::App& app, RunOptions& opts);
int runRun(const fs::RootPaths& roots, const RunOptions& opts);

}  // namespace tally::cli
