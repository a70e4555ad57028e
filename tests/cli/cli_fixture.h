// The CLI suite's synthetic host (Cli): the scenario's proc, sys and cgroup
// trees, the --proc-root/--sys-root/--cgroup-root that point tally at them,
// and an element of a JSON array by key. Shared by cli_test.cpp and
// cli_commands_test.cpp.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/fake_host.h"
#include "support/scenario.h"

namespace tally::clitest {

using namespace tally::testing;
using json = nlohmann::json;

// Every command a user types, by its words: the man page and the shell
// completion are each checked against its --help.
inline const std::vector<std::vector<std::string>>& commandPaths() {
  static const std::vector<std::vector<std::string>> kPaths = {{"run"},
                                                               {"daemon"},
                                                               {"daemon", "status"},
                                                               {"daemon", "reload"},
                                                               {"attach"},
                                                               {"seats"},
                                                               {"metrics"},
                                                               {"top"},
                                                               {"leases"},
                                                               {"pools"},
                                                               {"events"},
                                                               {"logs"},
                                                               {"doctor"},
                                                               {"gpu"},
                                                               {"lease", "show"},
                                                               {"lease", "release"},
                                                               {"ledger"},
                                                               {"ledger", "verify"},
                                                               {"config", "check"},
                                                               {"config", "suggest"}};
  return kPaths;
}

struct Cli : ::testing::Test {
  FakeHost host;
  void SetUp() override {
    buildScenario(host, readFile(std::string(TALLY_FIXTURE_DIR) + "/fdinfo/xe-kernel-doc.fdinfo"));
  }
  std::string roots() const {
    return "--proc-root " + host.procRoot() + " --sys-root " + host.sysRoot() + " --cgroup-root " +
           host.cgroupRoot();
  }
  static const json& byKey(const json& array, const char* key, const json& value) {
    for (const auto& e : array)
      if (e[key] == value) return e;
    static const json kNull;
    ADD_FAILURE() << "no element with " << key << " = " << value;
    return kNull;
  }
};

}  // namespace tally::clitest
