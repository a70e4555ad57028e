#include "support/daemon.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/fake_host.h"

namespace tally::testing {

DaemonUnderTest::DaemonUnderTest(std::string dir, std::string configToml,
                                 std::vector<std::string> extraArgs)
    : dir_(std::move(dir)), extra_(std::move(extraArgs)) {
  socket_ = dir_ + "/tally.sock";
  state_ = dir_ + "/state";
  config_ = dir_ + "/tally.toml";
  writeFile(config_, "[daemon]\nsocket = \"" + socket_ + "\"\nstate_dir = \"" + state_ + "\"\n" +
                         configToml);
}

DaemonUnderTest::~DaemonUnderTest() {
  if (running_) kill9();
}

bool DaemonUnderTest::start() {
  std::vector<std::string> argv = {TALLY_BINARY};
  argv.insert(argv.end(), extra_.begin(), extra_.end());
  argv.insert(argv.end(), {"daemon", "--config", config_});
  spawned_ = spawnProgram(argv);
  running_ = true;
  for (int i = 0; i < 200; ++i) {
    if (auto c = rpc::Client::connect(socket_)) {
      if (auto m = c->call(rpc::api::Hello{}, {}, 2000); m && m->ok) return true;
    }
    int status = 0;
    if (::waitpid(spawned_.pid, &status, WNOHANG) == spawned_.pid) {
      running_ = false;
      ADD_FAILURE() << "the daemon exited: " << readFile(spawned_.errPath);
      return false;
    }
    ::usleep(50'000);
  }
  ADD_FAILURE() << "the daemon did not answer within 10 s: " << readFile(spawned_.errPath);
  return false;
}

void DaemonUnderTest::kill9() {
  if (!running_) return;
  ::kill(spawned_.pid, SIGKILL);
  (void)waitProgram(spawned_);
  running_ = false;
}

ProgramResult DaemonUnderTest::stop() {
  ::kill(spawned_.pid, SIGTERM);
  running_ = false;
  return waitProgram(spawned_);
}

rpc::Client DaemonUnderTest::client() const {
  auto c = rpc::Client::connect(socket_);
  if (!c) throw std::runtime_error(c.error().message);
  return std::move(*c);
}

std::string DaemonUnderTest::log() const { return readFile(spawned_.errPath); }

}  // namespace tally::testing
