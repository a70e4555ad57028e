// The VM fixture of the daemon's suites (VmDaemon, and the VmRedTeam and
// VmNoBpfLsm built on it): a tally daemon per test as systemd runs it in
// production (Type=notify, a watchdog, Restart=always), its config and
// socket in /tmp/vmd-<test>, and what the tests read back through the CLI
// (the ledger's rows, a lease's state). Shared by daemon_test.cpp,
// daemon_units_test.cpp and daemon_redteam_test.cpp. VM harness only.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/fake_host.h"
#include "support/process.h"
#include "support/raw_client.h"

namespace tally::vmdaemon {

using json = nlohmann::json;
using namespace tally::testing;
using namespace std::chrono_literals;

inline const std::string kTally = TALLY_BINARY;
inline const std::string kWorkload = TALLY_VM_WORKLOAD;
inline constexpr std::uint64_t kMiB = 1 << 20;

class VmDaemon : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_NE(std::getenv("TALLY_IN_VM"), nullptr)
        << "these tests need the VM harness: vm/run.sh -- tally_vm_tests";
    const char* ko = std::getenv("TALLY_TESTDRM_KO");
    ASSERT_NE(ko, nullptr);
    if (::access("/sys/module/tally_testdrm", F_OK) != 0) {
      ASSERT_EQ(shell("modprobe drm && insmod " + std::string(ko)), 0);
    }
  }
  void SetUp() override {
    name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    dir = "/tmp/vmd-" + name;
    shell("rm -rf " + dir);
    makeDirs(dir);
    socket = dir + "/tally.sock";
    config = dir + "/tally.toml";
    unit =
        "tally-daemon-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".service";
    writeFile(
        config,
        "[daemon]\nsocket = \"" + socket + "\"\nstate_dir = \"" + dir +
            "/state\"\nsample_interval = \"200ms\"\n"
            "client_grace = \"30s\"\n\n[pools.one]\ncapacity = 1\n\n[pools.gpu]\ncapacity = 4\n"
            "gpu_memory_budget = \"96GiB\"\nmemory_budget = \"1GiB\"\n");
  }
  void TearDown() override {
    shell("systemctl stop " + unit + " 2>/dev/null; systemctl reset-failed " + unit +
          " 2>/dev/null");
    // A test that failed midway leaves its leases' scopes running, their
    // workloads holding the test driver: the suites after it would fail on that.
    shell("systemctl stop 'tally-*.scope' 2>/dev/null");
  }
  // Kills the daemon with SIGKILL and waits for systemd's restart (Restart=always)
  // to report READY=1 again. The new daemon loads or re-uses the kernel charge's
  // programs first, which under TCG on 7.x takes longer than elsewhere: a bound for
  // liveness, not a speed. On failure, the unit's journal says why.
  ::testing::AssertionResult killAndAwaitRestart() {
    std::string mainPid = shellOut("systemctl show -p MainPID --value " + unit);
    if (shell("systemctl kill -s KILL " + unit) != 0)
      return ::testing::AssertionFailure() << "systemctl kill failed";
    if (eventually(
            [&] {
              std::string now = shellOut("systemctl show -p MainPID --value " + unit);
              return now != mainPid && now != "0" &&
                     shellOut("systemctl show -p ActiveState --value " + unit) == "active";
            },
            90s))
      return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << "systemd did not restart " << unit << " within 90 s:\n"
           << shellOut("systemctl status --no-pager " + unit +
                       " 2>&1; journalctl --no-pager -n 60 -u " + unit);
  }
  // The daemon as systemd runs it in production: Type=notify, a watchdog,
  // restarted by systemd when it dies. systemd-run returns once READY=1.
  void startDaemon() {
    ASSERT_EQ(shell("systemd-run --quiet --unit=" + unit +
                    " -p Type=notify -p WatchdogSec=20s -p Restart=always -p RestartSec=300ms " +
                    kTally + " daemon --config " + config),
              0);
  }
  ProgramResult tally(std::vector<std::string> args) {
    args.insert(args.begin(), kTally);
    return runProgram(args, {"TALLY_SOCKET=" + socket});
  }
  json ledgerRows(const std::string& lease) {
    auto r = tally({"ledger", "export", "--config", config});
    json all = json::parse(r.out, nullptr, false);
    json out = json::array();
    if (!all.is_array()) return out;
    for (const auto& row : all) {
      if (row["lease"] == lease) out.push_back(row);
    }
    return out;
  }
  std::vector<std::string> kinds(const std::string& lease) {
    std::vector<std::string> k;
    for (const auto& r : ledgerRows(lease)) k.push_back(r["kind"]);
    return k;
  }
  // The barrier a workload sets once it holds its memory (tally_vm_workload ... READY).
  static bool ready(const std::string& path) {
    return eventually([&] { return ::access(path.c_str(), F_OK) == 0; }, 30s);
  }
  // The daemon's view of a lease, once `done` holds for it.
  json leaseWhen(const std::string& lease, const std::function<bool(const json&)>& done) {
    json s;
    eventually(
        [&] {
          s = json::parse(tally({"lease", "show", lease, "--json"}).out, nullptr, false);
          return s.is_object() && done(s);
        },
        30s);
    return s;
  }
  // The id of the live lease named `name` once it is in `state`, "" if it never is.
  std::string leaseNamed(const std::string& leaseName, const std::string& state) {
    std::string id;
    eventually(
        [&] {
          json l = json::parse(tally({"leases", "--json"}).out, nullptr, false);
          if (!l.is_array()) return false;
          for (const auto& e : l) {
            if (e.value("name", "") == leaseName && e.value("state", "") == state)
              id = e.value("lease", "");
          }
          return !id.empty();
        },
        30s);
    return id;
  }
  void expectChainIntact() {
    auto v = tally({"ledger", "verify", "--config", config});
    EXPECT_EQ(v.exitCode(), 0) << v.out << v.err;
  }

  static inline int counter = 0;
  std::string name, dir, socket, config, unit;
};

// The test driver's charge_memcg: whether its buffers are charged to the
// allocating cgroup's memory (tomorrow's amdgpu) or not (today's).
inline void setCharging(bool on) {
  std::ofstream("/sys/module/tally_testdrm/parameters/charge_memcg") << (on ? "1" : "0");
}

}  // namespace tally::vmdaemon
