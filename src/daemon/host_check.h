// `tally config check` against this host: what the daemon would find here,
// from one host snapshot. Problems are what it would refuse to start with (a
// metrics textfile directory that does not exist); warnings are settings that
// cannot mean what they say here (a pool device not on this host, a budget
// above what the host or the pool's devices hold).
#pragma once

#include <string>
#include <vector>

#include "config/config.h"
#include "host/snapshot.h"

namespace tally::daemon {

struct HostFindings {
  std::vector<std::string> problems, warnings;
};

HostFindings checkOnHost(const config::Config& c, const host::Snapshot& host);

}  // namespace tally::daemon
