// `tally config check` against this host: what the daemon would find here,
// from one host snapshot. Problems are what it would refuse to start with (a
// metrics textfile directory that does not exist); warnings are settings that
// cannot mean what they say here (a pool device not on this host, a budget
// above what the host or the pool's devices hold).
#pragma once

#include <string>
#include <vector>

#include "config/config.h"
#include "fs/root.h"
#include "host/snapshot.h"

namespace tally::daemon {

struct HostFindings {
  std::vector<std::string> problems, warnings;
};

// `stateDir`: the ledger's directory as the daemon would use it (the
// config's, or the default). The same checks the daemon makes at start, so
// `config check` passing means the daemon starts: the socket group exists,
// the state directory is trusted (fs::checkTrustedDir), and each declared
// lease could be granted (admission::Engine::check, as the daemon asks it).
HostFindings checkOnHost(const config::Config& c, const host::Snapshot& host,
                         const std::string& stateDir);

// A reload's gate (ServiceEnv::readConfig): the file read and checked as
// `config check` checks it, on this host now. The config, or every problem
// in one message (warnings do not refuse it, as they do not refuse a start).
Result<config::Config> readChecked(const std::string& path, const fs::Root& proc,
                                   const fs::Root& sys);

}  // namespace tally::daemon
