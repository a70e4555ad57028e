#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "daemon/build_info.h"
#include "fs/root.h"

namespace tally::cli {

inline constexpr const char* kDefaultConfig = "/etc/tally/tally.toml";

struct DaemonOptions {
  bool loadKernelCharge = false;  // `tally daemon load-kernel-charge`
  std::string config = kDefaultConfig;
  std::string metricsTextfile,
      metricsListen;        // override [daemon] metrics_textfile / metrics_listen
  daemon::BuildInfo build;  // set by main from the build
};
struct ConfigCheckOptions {
  std::string file = kDefaultConfig;
  bool json = false;
  // `tally config suggest`
  bool suggest = false;
  std::uint64_t capacity = 4;
  std::string reserve;  // a size; empty: the default (config/suggest.h)
};

void addDaemonCommand(CLI::App& app, DaemonOptions& opts);
int runDaemon(const fs::RootPaths& paths, const DaemonOptions& opts);
void addConfigCommand(CLI::App& app, ConfigCheckOptions& opts);
// Needs the roots: it checks the config against this host too.
int runConfigCheck(const fs::RootPaths& roots, const ConfigCheckOptions& opts);
// `tally config suggest`: pools from this host's MemTotal and GPUs, as TOML on stdout.
int runConfigSuggest(const fs::RootPaths& roots, const ConfigCheckOptions& opts);

}  // namespace tally::cli
