// The Slurm suite's fixture (VmSlurm): the release under test and the plugin
// built for it, a one-node cluster made once for the suite (vm/slurm-node.sh),
// the tally daemon it talks to, and the ledger's rows read back by lease name.
// Shared by slurm_test.cpp, slurm_jobs_test.cpp and slurm_controller_test.cpp.
// VM harness only.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "support/fake_host.h"
#include "support/page_quotes.h"
#include "support/process.h"
#include "support/raw_client.h"

namespace tally::vmslurm {

using json = nlohmann::json;
using namespace tally::testing;
using namespace std::chrono_literals;

inline const std::string kTally = TALLY_BINARY;
inline const std::string kWorkload = TALLY_VM_WORKLOAD;
// The Slurm under test: Debian 12's own, or the release of the root in TALLY_SLURM_ROOT.
inline std::string slurmRelease() {
  const char* r = std::getenv("TALLY_SLURM_RELEASE");
  return r && *r ? r : "22.05";
}
inline const std::string kRelease = slurmRelease();
// The plugin built for that release (SPANK loads only its own major.minor).
inline std::string pluginFor(const std::string& release) {
  std::string plugin = TALLY_SPANK_PLUGIN;
  if (release == "22.05" || plugin.empty()) return plugin;
  return plugin.substr(0, plugin.rfind('/')) + "/tally_spank_" + release + ".so";
}
inline const std::string kPlugin = pluginFor(kRelease);
// The barrier plugin (tests/vm/spank_gate.cpp) built for the same release, beside it.
inline std::string gateFor(const std::string& release) {
  std::string dir = kPlugin.substr(0, kPlugin.rfind('/'));
  return dir + (release == "22.05" ? "/tally_test_gate.so" : "/tally_test_gate_" + release + ".so");
}
inline const std::string kGate = gateFor(kRelease);
inline constexpr std::uint64_t kMiB = 1 << 20;
inline const std::string kDir = "/tmp/vm-slurm";
inline const std::string kSocket = kDir + "/tally.sock";
inline const std::string kConfig = kDir + "/tally.toml";
inline const std::string kDaemonUnit = "tally-slurm-daemon.service";

class VmSlurm : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_NE(std::getenv("TALLY_IN_VM"), nullptr)
        << "these tests need the VM harness: vm/run.sh -- tally_vm_tests";
    ASSERT_FALSE(kPlugin.empty())
        << "tally was built without slurm/spank.h: run scripts/install-deps.sh (libslurm-dev)";
    ASSERT_EQ(::access("/usr/sbin/slurmd", X_OK), 0)
        << "slurmd missing: run scripts/install-deps.sh";
    if (kRelease != "22.05") {
      const char* root = std::getenv("TALLY_SLURM_ROOT");
      ASSERT_TRUE(root && *root)
          << "Slurm " << kRelease << " runs from a trixie root: "
          << "vm/run.sh --env TALLY_SLURM_ROOT=$(vm/debian-slurm.sh trixie 24.11) ...";
      ASSERT_EQ(::access(kPlugin.c_str(), R_OK), 0)
          << kPlugin
          << " missing: configure with -DTALLY_SLURM_HEADERS=\"$(scripts/slurm-headers.sh)\" "
          << "and build tally_spank_all";
    }
    const char* ko = std::getenv("TALLY_TESTDRM_KO");
    ASSERT_NE(ko, nullptr);
    if (::access("/sys/module/tally_testdrm", F_OK) != 0) {
      ASSERT_EQ(shell("modprobe drm && insmod " + std::string(ko)), 0);
    }
    shell("rm -rf " + kDir);
    makeDirs(kDir);
    writeFile(kConfig,
              "[daemon]\nsocket = \"" + kSocket + "\"\nstate_dir = \"" + kDir +
                  "/state\"\nsample_interval = \"200ms\"\n\n"
                  "# The same number as the node's tallymem GRES: Slurm places, tally "
                  "enforces.\n[pools.slurm]\ncapacity = 8\ngpu_memory_budget = \"1GiB\"\n\n"
                  "# A pool steps may not name (plugstack.conf allows only slurm).\n"
                  "[pools.slurm-batch]\ncapacity = 8\n");
    std::string source = TALLY_SOURCE_DIR;
    auto node = runProgram(
        {source + "/vm/slurm-node.sh", "optional " + kPlugin + " socket=" + kSocket +
                                           " end_wait=20s gres=tallymem,gpumem admin_comment=on"});
    ASSERT_EQ(node.exitCode(), 0) << node.out << node.err;
  }
  void SetUp() override { startDaemon(); }
  void TearDown() override {
    shell("systemctl stop " + kDaemonUnit + " 2>/dev/null; systemctl reset-failed " + kDaemonUnit +
          " 2>/dev/null");
  }
  static void startDaemon() {
    ASSERT_EQ(shell("systemctl is-active --quiet " + kDaemonUnit +
                    " || systemd-run --quiet --unit=" + kDaemonUnit + " -p Type=notify " + kTally +
                    " daemon --config " + kConfig),
              0);
  }
  static ProgramResult tally(std::vector<std::string> args) {
    args.insert(args.begin(), kTally);
    return runProgram(args, {"TALLY_SOCKET=" + kSocket});
  }
  // Every ledger row of the lease named `name`, in order.
  static json rowsNamed(const std::string& leaseName) {
    json all = json::parse(tally({"ledger", "export", "--config", kConfig}).out, nullptr, false);
    std::string id;
    json out = json::array();
    if (!all.is_array()) return out;
    for (const auto& row : all) {
      if (row.value("kind", "") == "granted" && row["body"].value("name", "") == leaseName)
        id = row.value("lease", "");
      if (!id.empty() && row.value("lease", "") == id) out.push_back(row);
    }
    return out;
  }
  static json terminal(const json& rows) {
    for (const auto& r : rows) {
      std::string k = r.value("kind", "");
      if (k == "outcome" || k == "lost" || k == "withdrawn") return r;
    }
    return json();
  }
  // Connections waiting in the daemon's accept queue: a frozen daemon's
  // callers, queued. /proc/net/unix lists each not yet accepted with the
  // listener's path and state 02 (SS_CONNECTING); `ss` needs unix_diag.
  static int acceptQueue() {
    std::string q =
        shellOut("awk '$8 == \"" + kSocket + "\" && $6 == \"02\"' /proc/net/unix | wc -l");
    return q.empty() ? -1 : std::atoi(q.c_str());
  }
  // kill -9 of the daemon (frozen or not), then a new one: a crash and systemd's restart.
  static void restartDaemonHard() {
    // `systemctl stop` returns once the killed unit is inactive: no polling.
    ASSERT_EQ(shell("systemctl kill -s KILL " + kDaemonUnit + "; systemctl stop " + kDaemonUnit +
                    "; systemctl reset-failed " + kDaemonUnit + " 2>/dev/null; true"),
              0);
    startDaemon();
  }
  // The node is back after slurmd (or slurmctld) restarted, or a node was removed.
  static bool nodeIdle() {
    return eventually([] { return shellOut("sinfo -h -o %T").find("idle") != std::string::npos; },
                      60s);
  }
  // Whether `cgroup` is job `job`'s cgroup on the node (`below`: with that
  // path under it): job_J, or, as Slurm 26.05 names it by default
  // (cgroup.conf CgroupJobIdPaths=no), a SLUID: "s" and 13 of Crockford's
  // base32.
  static bool isJobCgroup(const std::string& cgroup, const std::string& job,
                          const std::string& below = "") {
    std::string leaf = kRelease < "26" ? "job_" + job : "s[0-9A-HJKMNP-TV-Z]{13}";
    return std::regex_search(cgroup, std::regex("/" + leaf + below + "$"));
  }
  // srun's job id, written by the step itself before it allocates.
  static std::string jobIdFrom(const std::string& path) {
    std::string s = readFile(path);
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
  }
};

}  // namespace tally::vmslurm
