// What the daemon was built from, as `tally --version` says it: its version
// and commit, shown in the overview (`daemon status`) and as
// tally_build_info{version,commit}, so a fleet sees which nodes run what.
// Set by the binary (cli/main.cpp, from the build); "unknown" elsewhere.
#pragma once

#include <string>

namespace tally::daemon {

struct BuildInfo {
  std::string version = "unknown";
  std::string commit = "unknown";  // the short hash, or "unknown" outside a git checkout
};

}  // namespace tally::daemon
