#pragma once

#include <CLI/CLI.hpp>

#include "fs/root.h"

namespace tally::cli {

struct GpuOptions {
  bool json = false;
  std::string by = "process";
  std::string cgroup;  // empty: whole host
};

void addGpuCommand(CLI::App& app, GpuOptions& opts);
int runGpu(const fs::RootPaths& roots, const GpuOptions& opts);

}  // namespace tally::cli
