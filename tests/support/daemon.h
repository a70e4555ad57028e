// A `tally daemon` process for tests: started on a config in a temp dir,
// ready once it answers "hello", stopped with SIGTERM or killed with SIGKILL.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "rpc/client.h"
#include "support/process.h"

namespace tally::testing {

class DaemonUnderTest {
 public:
  // `extraArgs` go before "daemon" (e.g. --cgroup-root DIR).
  DaemonUnderTest(std::string dir, std::string configToml, std::vector<std::string> extraArgs = {});
  ~DaemonUnderTest();
  const std::string& socket() const { return socket_; }
  const std::string& config() const { return config_; }
  const std::string& stateDir() const { return state_; }
  // Spawns and waits (up to 10 s) until the socket answers; false on failure.
  bool start();
  void kill9();
  ProgramResult stop();  // SIGTERM, then its output
  pid_t pid() const { return spawned_.pid; }
  rpc::Client client() const;
  std::string log() const;  // stderr so far

 private:
  std::string dir_, socket_, config_, state_;
  std::vector<std::string> extra_;
  Spawned spawned_;
  bool running_ = false;
};

}  // namespace tally::testing
