// tally daemon from its config to its event loop (daemon/startup.cpp says the
// order). The CLI parses the command line, calls serve(), and maps how it
// ended to an exit status.
#pragma once

#include <string>

#include "bpf/kernel_charge_bpf.h"
#include "config/config.h"
#include "daemon/build_info.h"
#include "fs/root.h"

namespace tally::daemon {

struct StartOptions {
  std::string config;  // the TOML file
  // Override [daemon] metrics_textfile / metrics_listen ("" = the config's).
  std::string metricsTextfile, metricsListen;
  fs::RootPaths roots;
  BuildInfo build = {};
};

enum class Ended {
  Stopped,         // SIGTERM/SIGINT: live leases stay in the ledger, re-adopted on restart
  ConfigProblems,  // the config does not load (every problem printed)
  Usage,           // a command-line value is wrong (--metrics-listen)
  Environment,     // the state directory, ledger, roots or socket cannot be used
};

Ended serve(const StartOptions& o);

// What the kernel charge loads with: the host's devices, and the maps
// sized from the host's GPU memory and the config's limits (bpf/sizing.h).
// The daemon and its privileged loader (tally daemon load-kernel-charge) use
// the same; it lives here, above both the config and bpf/, so neither
// includes the other.
bpf::LoadOptions kernelChargeLoadOptions(const fs::Root& sys, const config::Config& cfg);

}  // namespace tally::daemon
