// The fixture of tally run's VM suites (VmSystem, and the VmCgroupfs and
// VmKernel built on it): the test DRM driver loaded once, `tally run --json`
// with a state dir per test, and its record parsed. Shared by system_test.cpp
// and system_kernel_test.cpp. VM harness only.
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/fake_host.h"
#include "support/process.h"
#include "support/raw_client.h"

namespace tally::vmsystem {

using json = nlohmann::json;
using namespace tally::testing;
using namespace std::chrono_literals;

inline constexpr std::uint64_t kMiB = 1 << 20;
inline const std::string kTally = TALLY_BINARY;
inline const std::string kWorkload = TALLY_VM_WORKLOAD;

inline bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

struct Tally {
  ProgramResult result;
  json record;
};

class VmSystem : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_NE(std::getenv("TALLY_IN_VM"), nullptr)
        << "these tests need the VM harness: vm/run.sh -- "
        << "tally_vm_tests";
    const char* ko = std::getenv("TALLY_TESTDRM_KO");
    ASSERT_NE(ko, nullptr);
    if (!exists("/sys/module/tally_testdrm")) {
      ASSERT_EQ(shell("modprobe drm && insmod " + std::string(ko)), 0)
          << "cannot load the test DRM driver";
    }
  }

  std::string stateDir() const {
    return "/tmp/tally-state-" +
           std::string(::testing::UnitTest::GetInstance()->current_test_info()->name());
  }

  // tally run --json --state-dir <per test> ARGS -- CMD...
  Tally run(const std::vector<std::string>& options, const std::vector<std::string>& command,
            const std::vector<std::string>& env = {}) {
    std::vector<std::string> argv{kTally, "run", "--json", "--state-dir", stateDir()};
    argv.insert(argv.end(), options.begin(), options.end());
    argv.push_back("--");
    argv.insert(argv.end(), command.begin(), command.end());
    Tally t;
    t.result = runProgram(argv, env);
    t.record = json::parse(t.result.out, nullptr, false);
    EXPECT_FALSE(t.record.is_discarded()) << "no JSON record on stdout; stderr:\n" << t.result.err;
    return t;
  }
};

inline std::string describe(const Tally& t) {
  return "stderr:\n" + t.result.err + "\nrecord:\n" + t.record.dump(2);
}

}  // namespace tally::vmsystem
