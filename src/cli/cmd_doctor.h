#pragma once

#include <CLI/CLI.hpp>

#include "fs/root.h"

namespace tally::cli {

struct DoctorOptions {
  bool json = false;
  bool active = false;
  std::string probeSize = "64MiB";
  std::string probeCgroup = "/";
  bool requireKernelBound = false;  // with --active: the kernel charge must run and be proven
  // --slurm: the node as its Slurm expects it (slurm/health.h)
  bool slurm = false;
  // "" = where slurmd reads it: /etc/slurm/plugstack.conf, else (a
  // configless cluster) slurmd's cache of the controller's copy.
  std::string plugstack;
  std::string pluginDir;  // "" = where the package installs the plugin
  // The whole --slurm check's time: inside NHC's default 30 s per check
  // (check_cmd_status -t 30), so NHC never kills it half-way.
  std::string slurmTimeout = "20s";
};

void addDoctorCommand(CLI::App& app, DoctorOptions& opts);
int runDoctor(const fs::RootPaths& roots, const DoctorOptions& opts);
int runDoctorSlurm(const fs::RootPaths& roots, const DoctorOptions& opts);  // cmd_doctor_slurm.cpp

}  // namespace tally::cli
