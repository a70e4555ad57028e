#pragma once

#include <CLI/CLI.hpp>

#include "fs/root.h"

namespace tally::cli {

struct DoctorOptions {
  bool json = false;
  bool active = false;
  std::string probeSize = "64MiB";
  std::string probeCgroup = "/";
};

void addDoctorCommand(CLI::App& app, DoctorOptions& opts);
int runDoctor(const fs::RootPaths& roots, const DoctorOptions& opts);

}  // namespace tally::cli
