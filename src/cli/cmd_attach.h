// `tally attach`: lease a workload that already runs (a unit, a container, a
// cgroup or a process's cgroup).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "cli/cmd_client.h"
#include "enforce/gpu_bound.h"

namespace tally::cli {

struct AttachOptions : DaemonCallOptions {
  std::string unit, cgroup, container, engine;
  std::string parent;  // the lease this one nests in (a child lease)
  std::uint64_t pid = 0;
  std::vector<std::string> pools;
  std::string memoryMax, gpuMemoryMax, gpuMemoryHigh, name, queueTimeout;
  std::string gpuAction = enforce::actionName(enforce::kDefaultAction);
  bool force = false;  // even when already over a declared limit
  bool wait = false;   // queue when the pool cannot grant it now
  unsigned gpuOverSamples = enforce::kDefaultConsecutive;
  int priority = 0;
  std::vector<std::string> attrs;  // --attr KEY=VALUE
  bool json = false;
};

CLI::App* addAttachCommand(CLI::App& app, AttachOptions& opts);
int runAttach(const AttachOptions& opts);

}  // namespace tally::cli
