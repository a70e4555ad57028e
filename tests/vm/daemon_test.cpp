// tally daemon against a real systemd 252 (Type=notify service, watchdog,
// Restart=always after kill -9), real cgroup v2 and the test DRM driver:
// pools serialise `tally run --pool` clients, budgets refuse, attach meters a
// running service and a process's cgroup, and a daemon killed mid-lease
// re-adopts it and records its outcome exactly once. VM harness only.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "support/fake_host.h"
#include "support/process.h"
#include "support/raw_client.h"
#include "util/text.h"

namespace tally {
namespace {

using json = nlohmann::json;
using namespace tally::testing;
using namespace std::chrono_literals;

const std::string kTally = TALLY_BINARY;
const std::string kWorkload = TALLY_VM_WORKLOAD;
constexpr std::uint64_t kMiB = 1 << 20;

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

TEST_F(VmDaemon, RunsAsANotifyServiceAndReportsStatus) {
  startDaemon();
  EXPECT_EQ(shellOut("systemctl show -p ActiveState --value " + unit), "active");
  std::string status = shellOut("systemctl show -p StatusText --value " + unit);
  EXPECT_NE(status.find("0 leases held, 0 queued, 2 pools"), std::string::npos) << status;
  struct stat st {};
  ASSERT_EQ(::stat(socket.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  auto pools = tally({"pools", "--json"});
  ASSERT_EQ(pools.exitCode(), 0) << pools.err;
  json p = json::parse(pools.out);
  EXPECT_TRUE(p[1]["headroom"]["host_bytes"].is_number_unsigned()) << p;  // MemAvailable of the VM
  // tally daemon status: what the daemon says of itself, the in-kernel charge
  // as this kernel allows it (the BPF LSM on: charging and refusing).
  auto said = tally({"daemon", "status"});
  ASSERT_EQ(said.exitCode(), 0) << said.err;
  bool bpfLsm = readFile("/sys/kernel/security/lsm").find("bpf") != std::string::npos;
  EXPECT_NE(said.out.find(bpfLsm ? "\nin-kernel charge: charging and refusing in the kernel (BPF)\n"
                                 : "\nin-kernel charge: off: "),
            std::string::npos)
      << said.out;
  EXPECT_NE(said.out.find("\nleases: 0 live, 0 queued; sampled every "), std::string::npos)
      << said.out;
  EXPECT_NE(said.out.find(" writes\n"), std::string::npos) << said.out;
  // SIGTERM (systemctl stop) ends it cleanly.
  EXPECT_EQ(shell("systemctl stop " + unit), 0);
  EXPECT_EQ(shellOut("systemctl show -p Result --value " + unit), "success");
}

TEST_F(VmDaemon, TwoRunsOnACapacityOnePoolSerialise) {
  startDaemon();
  std::string log = dir + "/intervals", go = dir + "/go";
  // Each workload logs its start and waits for the test's go (a file), then logs its end.
  std::string body = "echo start $(date +%s%N) >> " + log + "; while [ ! -e " + go +
                     " ]; do sleep 0.05; done; echo end $(date +%s%N) >> " + log;
  auto a = spawnProgram({kTally, "run", "--pool", "one", "--name", "first", "--", "sh", "-c", body},
                        {"TALLY_SOCKET=" + socket});
  ASSERT_FALSE(leaseNamed("first", "running").empty());  // the barrier: a holds the pool
  auto b =
      spawnProgram({kTally, "run", "--pool", "one", "--name", "second", "--", "sh", "-c", body},
                   {"TALLY_SOCKET=" + socket});
  ASSERT_FALSE(leaseNamed("second", "queued").empty());  // and b waits behind it
  writeFile(go, "");
  auto ra = waitProgram(a);
  auto rb = waitProgram(b);
  ASSERT_EQ(ra.exitCode(), 0) << ra.err;
  ASSERT_EQ(rb.exitCode(), 0) << rb.err;
  EXPECT_NE(rb.err.find("position 1 of 1: pool one is full: 1 of 1 leases hold it"),
            std::string::npos)
      << rb.err;
  // The intervals do not overlap: start, end, start, end.
  std::ifstream in(log);
  std::vector<std::pair<std::string, unsigned long long>> ev;
  std::string what;
  unsigned long long t;
  while (in >> what >> t) ev.emplace_back(what, t);
  ASSERT_EQ(ev.size(), 4u);
  EXPECT_EQ(ev[0].first, "start");
  EXPECT_EQ(ev[1].first, "end");
  EXPECT_EQ(ev[2].first, "start");
  EXPECT_EQ(ev[3].first, "end");
  EXPECT_LT(ev[1].second, ev[2].second);
  // Both outcomes are in the daemon's ledger, metered by the daemon too.
  auto list = tally({"ledger", "--json", "--config", config});
  json rows = json::parse(list.out);
  ASSERT_EQ(rows.size(), 2u) << list.out;
  for (const auto& r : rows) {
    EXPECT_EQ(r["record"]["outcome"]["class"], "exited");
    EXPECT_TRUE(r["record"]["daemon"]["memory_peak_bytes"].is_number_unsigned()) << r.dump(2);
    EXPECT_GE(r["record"]["daemon"]["samples"].get<int>(), 1);
  }
  expectChainIntact();
}

TEST_F(VmDaemon, BudgetRefusalsSayWhatToDeclare) {
  startDaemon();
  auto none = tally({"run", "--pool", "gpu", "--memory-max", "64M", "--", "true"});
  EXPECT_EQ(none.exitCode(), 125);
  EXPECT_NE(none.err.find("declare this lease's share with --gpu-memory-max"), std::string::npos)
      << none.err;
  auto tooBig = tally(
      {"run", "--pool", "gpu", "--memory-max", "64M", "--gpu-memory-max", "200G", "--", "true"});
  EXPECT_EQ(tooBig.exitCode(), 125);
  EXPECT_NE(tooBig.err.find("larger than pool 'gpu''s whole GPU memory budget"), std::string::npos)
      << tooBig.err;
  // Within budget, with a queue timeout while the budget is taken by a holder.
  // (The VM has 2 GiB: sizes stay under its MemAvailable, which may only delay.)
  std::string go = dir + "/go";
  auto holder = spawnProgram(
      {kTally, "run", "--pool", "gpu", "--memory-max", "600M", "--gpu-memory-max", "90G", "--name",
       "holder", "--", "sh", "-c", "while [ ! -e " + go + " ]; do sleep 0.05; done"},
      {"TALLY_SOCKET=" + socket});
  ASSERT_FALSE(leaseNamed("holder", "running").empty());
  auto waiter = tally({"run", "--pool", "gpu", "--memory-max", "600M", "--gpu-memory-max", "4G",
                       "--queue-timeout", "1s", "--", "true"});
  EXPECT_EQ(waiter.exitCode(), 125);
  EXPECT_NE(waiter.err.find("position 1 of 1: pool gpu's memory budget: needs 600.0 MiB"),
            std::string::npos)
      << waiter.err;
  EXPECT_NE(waiter.err.find("no grant within the queue timeout"), std::string::npos) << waiter.err;
  writeFile(go, "");
  EXPECT_EQ(waitProgram(holder).exitCode(), 0);
}

TEST_F(VmDaemon, AttachToARunningServiceMetersItAndEndsWithIt) {
  startDaemon();
  // A "server": 48 MiB of host memory and a 16 MiB GTT buffer through the test driver.
  std::string server = "tally-vm-server-" + std::to_string(::getpid()) + ".service";
  std::string hogReady = dir + "/hog.ready", gpuReady = dir + "/gpu.ready";
  ASSERT_EQ(shell("systemd-run --quiet --unit=" + server + " -p Type=exec sh -c '" + kWorkload +
                  " hog 48 60000 " + hogReady + " & " + kWorkload + " gpu gtt 16 1 60000 " +
                  gpuReady + " & wait'"),
            0);
  ASSERT_TRUE(ready(hogReady) && ready(gpuReady));
  auto a = tally({"attach", "--unit", server, "--pool", "gpu", "--memory-max", "256M",
                  "--gpu-memory-max", "1G", "--name", "server"});
  ASSERT_EQ(a.exitCode(), 0) << a.err;
  std::string lease = a.out.substr(0, 12);
  // MemoryMax went through systemd and reads back from the cgroup.
  EXPECT_EQ(shellOut("systemctl show -p MemoryMax --value " + server), "268435456");
  EXPECT_EQ(shellOut("cat /sys/fs/cgroup/system.slice/" + server + "/memory.max"), "268435456");
  json s = leaseWhen(
      lease, [](const json& l) { return l.contains("gpu") && l["gpu"].value("samples", 0) >= 2; });
  EXPECT_EQ(s["state"], "running");
  EXPECT_GE(s["memory"]["current_bytes"].get<std::uint64_t>(), 48 * kMiB) << s.dump(2);
  EXPECT_EQ(s["gpu"]["current_bytes"], 16 * kMiB)
      << s.dump(2);  // drm-fdinfo of the service's processes
  EXPECT_EQ(s["gpu"]["regions"]["gtt"], 16 * kMiB);
  auto pools = json::parse(tally({"pools", "--json"}).out);
  EXPECT_EQ(pools[1]["gpu_memory_declared"], 1ULL << 30);
  // The service stops: its cgroup empties, inotify ends the lease.
  ASSERT_EQ(shell("systemctl stop " + server), 0);
  EXPECT_TRUE(eventually([&] { return kinds(lease).size() >= 3; }, 10s));
  EXPECT_EQ(kinds(lease), (std::vector<std::string>{"granted", "adopted", "outcome"}));
  json outcome = ledgerRows(lease).back()["body"];
  EXPECT_EQ(outcome["outcome"]["class"], "ended") << outcome.dump(2);
  EXPECT_EQ(outcome["lease"]["unit"], server);
  EXPECT_EQ(outcome["gpu"]["peak_bytes"], 16 * kMiB);
  EXPECT_GE(outcome["memory"]["sampled"]["peak_current_bytes"].get<std::uint64_t>(), 48 * kMiB);
  expectChainIntact();
}

// An attached unit whose process the kernel OOM-kills at its MemoryMax:
// systemd (OOMPolicy=stop) stops the unit and removes its cgroup at once, yet
// the outcome names the OOM kill (the daemon read memory.events when the kill
// changed it, and when the cgroup emptied) and a memory peak, never "unknown".
TEST_F(VmDaemon, AnAttachedUnitsOomKillIsRecordedThoughSystemdRemovesItsCgroup) {
  startDaemon();
  std::string oomUnit = "tally-vm-oom-" + std::to_string(::getpid()) + ".service";
  std::string held = dir + "/oom.ready", go = dir + "/oom.go";
  // A holder of 24 MiB, and on the word a second process asking for 200 MiB
  // (over the 64 MiB MemoryMax: the kernel kills it). The word is a FIFO: the
  // unit's read blocks until the test opens it for writing.
  ASSERT_EQ(shell("mkfifo " + go), 0);
  ASSERT_EQ(shell("systemd-run --quiet --unit=" + oomUnit + " -p Type=exec sh -c '" + kWorkload +
                  " hog 24 60000 " + held + " & read word < " + go + "; " + kWorkload +
                  " hog 200 0; wait'"),
            0);
  ASSERT_TRUE(ready(held));
  auto a =
      tally({"attach", "--unit", oomUnit, "--pool", "one", "--memory-max", "64M", "--name", "oom"});
  ASSERT_EQ(a.exitCode(), 0) << a.err;
  std::string lease = a.out.substr(0, 12);
  ASSERT_EQ(shell("echo go > " + go), 0);
  // systemd's OOMPolicy=stop: at the kill it stops the whole unit and removes
  // its cgroup, racing the daemon's read of the counters at the end.
  EXPECT_TRUE(eventually([&] { return kinds(lease).size() >= 3; }, 10s));
  json outcome = ledgerRows(lease).back()["body"];
  EXPECT_EQ(outcome["outcome"]["class"], "oom-killed") << outcome.dump(2);
  EXPECT_EQ(outcome["outcome"]["oom_kill"], 1) << outcome.dump(2);
  EXPECT_EQ(outcome["outcome"]["summary"].get<std::string>().find("is unknown"), std::string::npos)
      << outcome.dump(2);
  EXPECT_GE(outcome["memory"]["peak_bytes"].get<std::uint64_t>(), 24 * kMiB) << outcome.dump(2);
  shell("systemctl reset-failed " + oomUnit + " 2>/dev/null");
}

TEST_F(VmDaemon, AttachToAProcesssCgroupWritesMemoryMaxAndEndsOnExit) {
  startDaemon();
  std::string cg = "/sys/fs/cgroup/vmd-pid-" + std::to_string(::getpid());
  ASSERT_EQ(shell("mkdir -p " + cg), 0);
  // The process joins the cgroup before it allocates: memory is charged to
  // the cgroup it was touched in and does not move with the process.
  auto worker = spawnProgram(
      {"sh", "-c", "echo $$ > " + cg + "/cgroup.procs && exec " + kWorkload + " hog 24 4000"});
  std::string inCgroup = "0::" + cg.substr(std::string("/sys/fs/cgroup").size());
  ASSERT_TRUE(eventually(
      [&] { return shellOut("cat /proc/" + std::to_string(worker.pid) + "/cgroup") == inCgroup; }));
  auto a = tally({"attach", "--pid", std::to_string(worker.pid), "--pool", "one", "--memory-max",
                  "128M", "--json"});
  ASSERT_EQ(a.exitCode(), 0) << a.err;
  json l = json::parse(a.out);
  std::string lease = l["lease"];
  EXPECT_EQ(l["cgroup"], cg.substr(std::string("/sys/fs/cgroup").size()));
  EXPECT_EQ(shellOut("cat " + cg + "/memory.max"),
            "134217728");  // no unit: written directly, read back
  EXPECT_EQ(waitProgram(worker).exitCode(), 0);
  EXPECT_TRUE(eventually([&] { return kinds(lease).size() >= 3; }, 10s));
  EXPECT_EQ(kinds(lease), (std::vector<std::string>{"granted", "adopted", "outcome"}));
  json outcome = ledgerRows(lease).back()["body"];
  EXPECT_EQ(outcome["outcome"]["class"], "ended");
  EXPECT_GE(outcome["memory"]["peak_bytes"].get<std::uint64_t>(), 24 * kMiB) << outcome.dump(2);
  shell("rmdir " + cg);
}

TEST_F(VmDaemon, Kill9MidLeaseReadoptsAndRecordsTheOutcomeOnce) {
  startDaemon();
  // The workload holds until the test says (a barrier): a busy machine's
  // restart must not outlast it.
  std::string release = dir + "/survivor.release";
  auto client = spawnProgram(
      {kTally, "run", "--pool", "one", "--memory-max", "64M", "--name", "survivor", "--", kWorkload,
       "gpu", "gtt", "1", "1", "600000", dir + "/survivor.ready", release},
      {"TALLY_SOCKET=" + socket});
  std::string lease = leaseNamed("survivor", "running");
  ASSERT_FALSE(lease.empty());
  // systemd restarts it; the new daemon re-adopts the lease from the ledger.
  ASSERT_TRUE(killAndAwaitRestart());
  auto shown = json::parse(tally({"lease", "show", lease, "--json"}).out, nullptr, false);
  EXPECT_EQ(shown["readopted_after_restart"], true) << shown.dump(2);
  writeFile(release, "");
  auto r = waitProgram(client);
  EXPECT_EQ(r.exitCode(), 0) << r.err;
  EXPECT_NE(r.err.find("reconnecting to resume lease"), std::string::npos) << r.err;
  EXPECT_EQ(kinds(lease), (std::vector<std::string>{"granted", "started", "readopted", "outcome"}));
  json outcome = ledgerRows(lease).back()["body"];
  EXPECT_EQ(outcome["outcome"]["class"], "exited");
  EXPECT_EQ(outcome["daemon"]["readopted_after_restart"], true);
  expectChainIntact();
}

// A `tally run --pool` client killed with SIGKILL leaves its lease slice
// behind (it removes it itself on a normal end). When the workload ends and
// the client never returns, the daemon closes the lease as lost and stops
// that slice: nothing of the lease stays active.
TEST_F(VmDaemon, AKilledClientsSliceIsStoppedWhenItsLeaseIsLost) {
  std::string text = readFile(config);
  text.replace(text.find("client_grace = \"30s\""), 20, "client_grace = \"1s\"");
  writeFile(config, text);
  startDaemon();
  std::string go = dir + "/go";
  auto client = spawnProgram({kTally, "run", "--pool", "one", "--name", "orphan", "--", "sh", "-c",
                              "while [ ! -e " + go + " ]; do sleep 0.05; done"},
                             {"TALLY_SOCKET=" + socket});
  std::string lease = leaseNamed("orphan", "running");
  ASSERT_FALSE(lease.empty());
  std::string slice = "tally-" + lease + ".slice";
  EXPECT_EQ(shellOut("systemctl is-active " + slice), "active");
  ::kill(client.pid, SIGKILL);
  waitProgram(client);
  writeFile(go, "");  // the workload ends with nobody to report it
  ASSERT_TRUE(
      eventually([&] { return !kinds(lease).empty() && kinds(lease).back() == "lost"; }, 30s))
      << lease;
  EXPECT_TRUE(eventually([&] { return shellOut("systemctl is-active " + slice) != "active"; }, 10s))
      << shellOut("systemctl status --no-pager " + slice);
  expectChainIntact();
}

void setCharging(bool on) {
  std::ofstream("/sys/module/tally_testdrm/parameters/charge_memcg") << (on ? "1" : "0");
}

// The daemon probes at start (coverage_probe = true) and records what it
// found: host+gtt with the driver charging, host after it stops; with GTT
// charged a lease's budget figures hold each byte once and gpu_memory_max
// only reports.
TEST_F(VmDaemon, RecordedCoverageFollowsTheKernelAndNothingCountsTwice) {
  std::string text = readFile(config);
  text.replace(text.find("[daemon]\n"), 9, "[daemon]\ncoverage_probe = true\n");
  writeFile(config, text);
  setCharging(true);
  startDaemon();
  json rows = ledgerRows("");
  ASSERT_FALSE(rows.empty());
  json cov = rows.back()["body"];
  EXPECT_EQ(rows.back()["kind"], "coverage");
  EXPECT_EQ(cov["coverage"], "host+gtt") << cov.dump(2);
  EXPECT_EQ(cov["active_probe"]["outcome"], "charged");

  // tally run maps --gpu-memory-max onto MemoryMax: through the daemon's
  // grant (--pool), and standalone from the ledger's row for this kernel.
  for (std::vector<std::string> mode : {std::vector<std::string>{"--pool", "gpu"},
                                        std::vector<std::string>{"--state-dir", dir + "/state"}}) {
    std::vector<std::string> args{"run", "--json",           "--memory-max",
                                  "64M", "--gpu-memory-max", "64M"};
    args.insert(args.end(), mode.begin(), mode.end());
    args.insert(args.end(), {"--", "true"});
    auto r = tally(args);
    ASSERT_EQ(r.exitCode(), 0) << r.err;
    json rec = json::parse(r.out);
    EXPECT_EQ(rec["declared"]["memory_max"], 64 * kMiB) << rec.dump(2);
    EXPECT_EQ(rec["declared"]["memory_max_with_gpu"], 128 * kMiB) << rec.dump(2);
    EXPECT_EQ(rec["applied"]["memory_max"], 128 * kMiB) << rec.dump(2);
  }

  std::string server = "tally-vm-charged-" + std::to_string(::getpid()) + ".service";
  std::string gpuReady = dir + "/charged.ready";
  ASSERT_EQ(shell("systemd-run --quiet --unit=" + server + " -p Type=exec " + kWorkload +
                  " gpu gtt 32 2 60000 " + gpuReady),
            0);
  ASSERT_TRUE(ready(gpuReady));
  auto a = tally({"attach", "--unit", server, "--pool", "gpu", "--memory-max", "256M",
                  "--gpu-memory-max", "32M"});
  ASSERT_EQ(a.exitCode(), 0) << a.err;
  std::string lease = a.out.substr(0, 12);
  // The barrier: the advisory bound has reported (two samples over 32M).
  ASSERT_TRUE(eventually([&] { return kinds(lease).back() == "gpu-bound"; }, 30s));
  json s = json::parse(tally({"lease", "show", lease, "--json"}).out);
  const auto& f = s["budget_figures"];
  EXPECT_EQ(f["coverage"], "host+gtt") << s.dump(2);
  EXPECT_EQ(f["gpu_bytes"], 64 * kMiB) << s.dump(2);
  std::uint64_t current = s["memory"]["current_bytes"];
  EXPECT_GE(current, 64 * kMiB) << "the GTT is charged: memory.current holds it";
  EXPECT_EQ(f["host_bytes"].get<std::uint64_t>() + 64 * kMiB, current) << s.dump(2);
  EXPECT_EQ(f["total_bytes"], current) << "GTT counted in host memory and GPU memory both";
  EXPECT_EQ(s["gpu_bound"]["advisory"], true);
  EXPECT_EQ(shellOut("systemctl is-active " + server), "active")
      << "an advisory bound killed the workload";
  EXPECT_EQ(kinds(lease).back(), "gpu-bound");
  EXPECT_EQ(ledgerRows(lease).back()["body"]["kind"], "gpu-memory-max-exceeded");
  shell("systemctl stop " + server);

  // The driver stops charging; the daemon restarts and says what changed.
  setCharging(false);
  shell("systemctl stop " + unit);
  startDaemon();
  rows = ledgerRows("");
  cov = rows.back()["body"];
  EXPECT_EQ(cov["coverage"], "host") << cov.dump(2);
  EXPECT_EQ(cov["changed_from"]["coverage"], "host+gtt");
  EXPECT_EQ(cov["active_probe"]["outcome"], "not-charged");
  expectChainIntact();
}

// An attached unit over its gpu_memory_max: the daemon kills it through
// systemd (KillUnit) after two samples, and the outcome names the figures.
TEST_F(VmDaemon, AttachedUnitOverGpuMemoryMaxIsKilledByTheDaemon) {
  setCharging(false);
  startDaemon();
  std::string server = "tally-vm-greedy-" + std::to_string(::getpid()) + ".service";
  std::string bystander = "tally-vm-bystander-" + std::to_string(::getpid()) + ".service";
  ASSERT_EQ(shell("systemd-run --quiet --unit=" + bystander + " -p Type=exec " + kWorkload +
                  " gpu gtt 32 2 60000 " + dir + "/b.ready"),
            0);
  ASSERT_EQ(shell("systemd-run --quiet --unit=" + server + " -p Type=exec " + kWorkload +
                  " gpu gtt 32 2 60000 " + dir + "/s.ready"),
            0);
  ASSERT_TRUE(ready(dir + "/b.ready") && ready(dir + "/s.ready"));
  auto events = spawnProgram({kTally, "events", "--json", "--count", "4", "--timeout", "30s"},
                             {"TALLY_SOCKET=" + socket});
  // Subscribed before the lease exists: `tally events` says so on stderr.
  ASSERT_TRUE(eventually(
      [&] { return readFile(events.errPath).find("following the daemon") != std::string::npos; }));
  // Measured before it is granted: already over, so refused with the figures
  // (exit 5: the daemon said no), and the service runs on untouched.
  auto refused = tally({"attach", "--unit", server, "--pool", "gpu", "--memory-max", "256M",
                        "--gpu-memory-max", "48M"});
  EXPECT_EQ(refused.exitCode(), 5) << refused.err;
  EXPECT_NE(refused.err.find("unit " + server +
                             " uses GPU memory 64.0 MiB now (DRM fdinfo), over --gpu-memory-max "
                             "48.0 MiB: attaching would kill it on arrival"),
            std::string::npos)
      << refused.err;
  EXPECT_EQ(shellOut("systemctl is-active " + server), "active");
  EXPECT_EQ(shellOut("systemctl show -P MemoryMax " + server), "infinity")
      << "a refused attach must change nothing";
  // --force: the operator means it; killed once it stays over.
  auto a = tally({"attach", "--unit", server, "--pool", "gpu", "--memory-max", "256M",
                  "--gpu-memory-max", "48M", "--force"});
  ASSERT_EQ(a.exitCode(), 0) << a.err;
  std::string lease = a.out.substr(0, 12);
  ASSERT_TRUE(eventually([&] { return kinds(lease).back() == "outcome"; }, 15s));
  json outcome = ledgerRows(lease).back()["body"];
  EXPECT_EQ(outcome["outcome"]["class"], "killed-by-tally") << outcome.dump(2);
  // The spacing named is the samples' real one: over its bound, the lease is
  // sampled every near_bound_interval (50 ms) once the daemon has seen it.
  EXPECT_EQ(outcome["outcome"]["summary"].get<std::string>().rfind(
                "killed by tally: GPU memory 64.0 MiB over gpu_memory_max 48.0 MiB (drm-fdinfo, 2 "
                "samples at ",
                0),
            0u)
      << outcome.dump(2);
  // Killed at the second consecutive sample over it (gpu_over_samples);
  // how soon after the first is the VM clock's business, printed, not asserted.
  const auto& kill = outcome["gpu"]["bound"]["events"].back();
  EXPECT_EQ(kill["samples"], 2) << outcome.dump(2);
  std::printf("[ reaction ] attached unit: first sample over -> kill: %llu ms\n",
              static_cast<unsigned long long>((kill["at_ns"].get<std::uint64_t>() -
                                               kill["first_over_ns"].get<std::uint64_t>()) /
                                              1000000));
  EXPECT_EQ(shellOut("systemctl is-active " + bystander), "active")
      << "a unit outside the lease was killed";
  // Subscribers saw it as it happened, and so did the journal.
  // The lease's whole life, in order: the refused attach never became one.
  auto ev = waitProgram(events);
  EXPECT_EQ(ev.exitCode(), 0) << ev.err;
  std::vector<std::string> seen;
  std::istringstream lines(ev.out);
  for (std::string line; std::getline(lines, line);) {
    json e = json::parse(line, nullptr, false);
    ASSERT_TRUE(e.is_object()) << line;
    EXPECT_EQ(e.value("lease", ""), lease) << line;
    seen.push_back(e.value("event", "") + "/" + e.value("kind", "") +
                   (e.contains("outcome") ? "/" + e.value("outcome", "") : ""));
  }
  EXPECT_EQ(seen,
            (std::vector<std::string>{"lease/granted", "lease/adopted", "gpu-bound/gpu-memory-kill",
                                      "lease/outcome/killed-by-tally"}))
      << ev.out;
  std::string journal = shellOut("journalctl --no-pager -o cat -t tally TALLY_LEASE=" + lease);
  EXPECT_NE(journal.find("killed by tally: GPU memory 64.0 MiB over gpu_memory_max 48.0 MiB"),
            std::string::npos)
      << journal;
  // The ended lease's timeline from the daemon's samples: drawn against its
  // limits with the kill marked, and the same as an SVG image.
  auto show = tally({"lease", "show", lease, "--svg", dir + "/timeline.svg"});
  ASSERT_EQ(show.exitCode(), 0) << show.err;
  std::printf("[ lease show with its timeline ]\n%s[ end ]\n", show.out.c_str());
  EXPECT_NE(show.out.find("GPU memory (device + host-uncharged, DRM fdinfo) against gpu_memory_max "
                          "48.0 MiB"),
            std::string::npos)
      << show.out;
  EXPECT_NE(show.out.find("▲"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("gpu-memory-kill"), std::string::npos) << show.out;
  std::string svg = readFile(dir + "/timeline.svg");
  EXPECT_EQ(svg.rfind("<svg ", 0), 0u);
  EXPECT_NE(svg.find("class=\"series\""), std::string::npos);
  EXPECT_NE(svg.find("class=\"limit\""), std::string::npos);
  shell("systemctl stop " + bystander + " " + server + "; systemctl reset-failed " + server +
        " 2>/dev/null");
  expectChainIntact();
}

// Journal entries of a lease by TALLY_EVENT, as `journalctl -o json` shows
// them; waits (5 s) until `last` has arrived.
std::map<std::string, json> journalOf(const std::string& lease, const std::string& last) {
  std::map<std::string, json> byEvent;
  eventually(
      [&] {
        byEvent.clear();
        auto rows = runProgram({"journalctl", "--no-pager", "-o", "json", "TALLY_LEASE=" + lease});
        std::istringstream lines(rows.out);
        for (std::string l; std::getline(lines, l);) {
          json e = json::parse(l, nullptr, false);
          if (e.is_object() && e.contains("TALLY_EVENT")) byEvent[e["TALLY_EVENT"]] = e;
        }
        return byEvent.count(last) != 0;
      },
      5s);
  return byEvent;
}

TEST_F(VmDaemon, LifecycleReachesTheJournalAndSeatsAndMetricsAreLive) {
  setCharging(false);
  startDaemon();
  std::string server = "tally-vm-lane-" + std::to_string(::getpid()) + ".service";
  ASSERT_EQ(shell("systemd-run --quiet --unit=" + server + " -p Type=exec sh -c '" + kWorkload +
                  " hog 48 60000 " + dir + "/h.ready & " + kWorkload + " gpu gtt 16 1 60000 " +
                  dir + "/g.ready & wait'"),
            0);
  ASSERT_TRUE(ready(dir + "/h.ready") && ready(dir + "/g.ready"));
  auto a = tally({"attach", "--unit", server, "--pool", "gpu", "--memory-max", "256M",
                  "--gpu-memory-max", "1G", "--name", "lane", "--attr", "model=qwen3-32b", "--attr",
                  "context_window=32768"});
  ASSERT_EQ(a.exitCode(), 0) << a.err;
  std::string lease = a.out.substr(0, 12);
  leaseWhen(lease,
            [](const json& l) { return l.contains("gpu") && l["gpu"].value("samples", 0) >= 2; });
  // The seat row: running from the real cgroup.events, figures from the real cgroup and fdinfo.
  json seats = json::parse(tally({"seats", "--json"}).out, nullptr, false);
  ASSERT_TRUE(seats.is_object());
  ASSERT_EQ(seats["seats"].size(), 1u) << seats.dump(2);
  json row = seats["seats"][0];  // a copy: a missing key reads as null and fails below, not aborts
  EXPECT_EQ(row["running"], true) << row.dump(2);
  EXPECT_EQ(row["fresh"], true) << row.dump(2);
  EXPECT_EQ(row["workload"]["unit"], server);
  EXPECT_GE(row["host"]["current_bytes"].get<std::uint64_t>(), 48 * kMiB) << row.dump(2);
  EXPECT_GE(row["host"]["peak_bytes"].get<std::uint64_t>(), 48 * kMiB) << row.dump(2);
  EXPECT_EQ(row["gpu"]["regions"]["gtt"]["current_bytes"], 16 * kMiB);
  EXPECT_EQ(row["declared"]["attributes"]["model"], "qwen3-32b");
  auto promtool = runProgram({"sh", "-c", "\"$0\" metrics | promtool check metrics", kTally},
                             {"TALLY_SOCKET=" + socket});
  EXPECT_EQ(promtool.exitCode(), 0) << promtool.out << promtool.err;

  ASSERT_EQ(shell("systemctl stop " + server), 0);
  auto attached = journalOf(lease, "lease-outcome");
  ASSERT_TRUE(attached.count("lease-granted")) << lease;
  EXPECT_EQ(attached["lease-granted"]["TALLY_POOL"], "gpu");
  EXPECT_EQ(attached["lease-granted"]["TALLY_LEASE_NAME"], "lane");
  EXPECT_EQ(attached["lease-granted"]["SYSLOG_IDENTIFIER"], "tally");
  ASSERT_TRUE(attached.count("lease-adopted"));
  EXPECT_EQ(attached["lease-adopted"]["TALLY_UNIT"], server);
  ASSERT_TRUE(attached.count("lease-outcome"));
  json end = attached["lease-outcome"];
  EXPECT_EQ(end["TALLY_OUTCOME"], "ended");
  EXPECT_EQ(end["PRIORITY"], "6");
  EXPECT_EQ(end["TALLY_GPU_PEAK_BYTES"], std::to_string(16 * kMiB)) << end.dump(2);
  // memory.peak when tally read it before systemd removed the stopped unit's
  // cgroup, else the samples' peak under its own name; one of them, never 0.
  std::string peak =
      end.value("TALLY_MEMORY_PEAK_BYTES", end.value("TALLY_MEMORY_PEAK_SAMPLED_BYTES", "0"));
  EXPECT_GE(std::stoull(peak), 48 * kMiB) << end.dump(2);
  EXPECT_FALSE(
      end.contains("TALLY_EXIT_CODE"));  // an attached workload has no exit status tally saw

  // A run lease through the pool: granted, started, exited 0, in the daemon's journal entries.
  auto r = tally({"run", "--pool", "gpu", "--memory-max", "128M", "--gpu-memory-max", "64M",
                  "--json", "--name", "batch", "--", kWorkload, "hog", "32", "300"});
  ASSERT_EQ(r.exitCode(), 0) << r.err;
  std::string run = json::parse(r.out).value("lease", json::object()).value("id", "");
  auto ran = journalOf(run, "lease-outcome");
  ASSERT_TRUE(ran.count("lease-started")) << run;
  EXPECT_EQ(ran["lease-started"].value("TALLY_CGROUP", "").find("/tally.slice/"), 0u)
      << ran["lease-started"].dump(2);
  ASSERT_TRUE(ran.count("lease-outcome"));
  EXPECT_EQ(ran["lease-outcome"]["TALLY_OUTCOME"], "exited");
  EXPECT_EQ(ran["lease-outcome"]["TALLY_EXIT_CODE"], "0");
  EXPECT_EQ(ran["lease-outcome"]["TALLY_POOL"], "gpu");
  EXPECT_GE(std::stoull(ran["lease-outcome"].value("TALLY_MEMORY_PEAK_BYTES", "0")), 32 * kMiB)
      << ran["lease-outcome"].dump(2);
  expectChainIntact();
}

}  // namespace
}  // namespace tally

namespace tally {
namespace {

// A unit file as an operator writes one (llama-server, or podman quadlet's
// generated service): each start removes its READY barrier and holds 16 MiB
// of GTT until stopped.
std::string installService(const std::string& service, const std::string& readyPath) {
  writeFile("/run/systemd/system/" + service, "[Service]\nType=exec\nExecStartPre=/bin/rm -f " +
                                                  readyPath + "\nExecStart=" + kWorkload +
                                                  " gpu gtt 16 1 600000 " + readyPath + "\n");
  shell("systemctl daemon-reload");
  return service;
}

void removeService(const std::string& service) {
  shell("systemctl stop " + service + " 2>/dev/null; rm -f /run/systemd/system/" + service +
        "; systemctl daemon-reload");
}

std::string summaryOf(const json& rows) {
  return rows.empty() ? "" : rows.back()["body"]["outcome"].value("summary", "");
}

// [leases.llama]: every run of the unit is leased by the daemon itself, one
// lease (and one row set) per run, across `systemctl restart` of the unit and
// a restart of the daemon.
TEST_F(VmDaemon, ADeclaredUnitIsLeasedAtEveryRunAcrossUnitAndDaemonRestarts) {
  setCharging(false);
  std::string server = installService(
      "tally-vm-declared-" + std::to_string(::getpid()) + ".service", dir + "/declared.ready");
  writeFile(config, readFile(config) + "\n[leases.llama]\nunit = \"" + server +
                        "\"\npools = [\"gpu\"]\nmemory_max = \"256MiB\"\n"
                        "gpu_memory_max = \"1GiB\"\nattributes = { model = \"vm\" }\n");
  ASSERT_EQ(shell("systemctl start " + server), 0);
  ASSERT_TRUE(ready(dir + "/declared.ready"));
  startDaemon();
  std::string first = leaseNamed("llama", "running");
  ASSERT_FALSE(first.empty()) << shellOut("journalctl -u " + unit + " --no-pager | tail -20");
  EXPECT_EQ(shellOut("systemctl show -p MemoryMax --value " + server), "268435456");
  json s = leaseWhen(
      first, [](const json& l) { return l.contains("gpu") && l["gpu"].value("samples", 0) >= 1; });
  EXPECT_EQ(s["gpu"]["current_bytes"], 16 * kMiB) << s.dump(2);

  // The unit restarts: its run's lease ends saying so; the new run is leased.
  ASSERT_EQ(shell("systemctl restart " + server), 0);
  std::string second;
  ASSERT_TRUE(eventually(
      [&] {
        second = leaseNamed("llama", "running");
        return !second.empty() && second != first;
      },
      30s));
  EXPECT_EQ(kinds(first), (std::vector<std::string>{"granted", "adopted", "outcome"}));
  std::string said = summaryOf(ledgerRows(first));
  EXPECT_EQ(said.rfind("unit " + server, 0), 0u) << said;
  EXPECT_TRUE(said.find(" restarted (a new run") != std::string::npos ||
              said.find(" is restarting") != std::string::npos)
      << said;
  EXPECT_NE(said.find("its next run is leased again ([leases.llama])"), std::string::npos) << said;

  // The daemon restarts: the run's lease is re-adopted, not leased twice.
  ASSERT_EQ(shell("systemctl restart " + unit), 0);
  ASSERT_TRUE(eventually([&] { return kinds(second).size() >= 3; }, 30s));
  EXPECT_EQ(kinds(second), (std::vector<std::string>{"granted", "adopted", "readopted"}));
  EXPECT_EQ(leaseNamed("llama", "running"), second);

  // The unit stops: the lease ends; nothing is leased until it starts again.
  ASSERT_EQ(shell("systemctl stop " + server), 0);
  ASSERT_TRUE(eventually([&] { return kinds(second).back() == "outcome"; }, 15s));
  // (followed by what is known of the OOM killer: systemd may have removed
  // the cgroup, and its memory.events, before the daemon read them)
  std::string stopped = summaryOf(ledgerRows(second));
  EXPECT_EQ(
      stopped.rfind(
          "unit " + server + " stopped; leased again when it next starts ([leases.llama])", 0),
      0u)
      << stopped;
  ASSERT_EQ(shell("systemctl start " + server), 0);
  std::string third;
  ASSERT_TRUE(eventually(
      [&] {
        third = leaseNamed("llama", "running");
        return !third.empty() && third != second;
      },
      30s));
  // One lease per run: three runs, three leases.
  auto all = json::parse(tally({"ledger", "export", "--config", config}).out);
  std::set<std::string> granted;
  for (const auto& row : all)
    if (row["kind"] == "granted") granted.insert(row["lease"].get<std::string>());
  EXPECT_EQ(granted, (std::set<std::string>{first, second, third}));
  removeService(server);
  expectChainIntact();
}

// An attached unit nothing declares restarts: its lease ends with an outcome
// that says the next run is not leased, in the ledger, `tally events` and
// the journal.
TEST_F(VmDaemon, AnUndeclaredAttachedUnitThatRestartsSaysItsNextRunIsNotLeased) {
  setCharging(false);
  std::string server = installService(
      "tally-vm-undeclared-" + std::to_string(::getpid()) + ".service", dir + "/u.ready");
  ASSERT_EQ(shell("systemctl start " + server), 0);
  ASSERT_TRUE(ready(dir + "/u.ready"));
  startDaemon();
  auto a = tally({"attach", "--unit", server, "--pool", "gpu", "--memory-max", "256M",
                  "--gpu-memory-max", "1G"});
  ASSERT_EQ(a.exitCode(), 0) << a.err;
  std::string lease = a.out.substr(0, 12);
  auto events = spawnProgram({kTally, "events", "--json", "--count", "1", "--timeout", "30s"},
                             {"TALLY_SOCKET=" + socket});
  ASSERT_TRUE(eventually(
      [&] { return readFile(events.errPath).find("following the daemon") != std::string::npos; }));
  ASSERT_EQ(shell("systemctl restart " + server), 0);
  ASSERT_TRUE(eventually([&] { return kinds(lease).back() == "outcome"; }, 15s));
  std::string said = summaryOf(ledgerRows(lease));
  EXPECT_NE(said.find("its next run is not leased: tally attach --unit " + server +
                      " again, or declare it in [leases.NAME]"),
            std::string::npos)
      << said;
  auto ev = waitProgram(events);
  EXPECT_EQ(ev.exitCode(), 0) << ev.err;
  EXPECT_NE(ev.out.find("its next run is not leased"), std::string::npos) << ev.out;
  auto journal =
      runProgram({"journalctl", "--no-pager", "-o", "cat", "-t", "tally", "TALLY_LEASE=" + lease});
  EXPECT_NE(journal.out.find("its next run is not leased"), std::string::npos) << journal.out;
  EXPECT_EQ(shellOut("systemctl is-active " + server),
            "active");  // it runs on, unleased, and says so
  removeService(server);
}

}  // namespace
}  // namespace tally

namespace tally {
namespace {

// tally run --pool --detach: the job outlives its client (a transient
// service holds its lease), its output is in the journal (tally logs), and
// release, lease show and the ledger work as for any lease.
TEST_F(VmDaemon, ADetachedJobOutlivesItsClientLogsToTheJournalAndIsReleased) {
  startDaemon();
  // The barrier: the job blocks reading a FIFO until the test writes to it.
  std::string go = dir + "/go";
  ASSERT_EQ(::mkfifo(go.c_str(), 0600), 0);
  auto started = tally({"run", "--pool", "one", "--detach", "--name", "detached", "--", "sh", "-c",
                        "echo hello-from-the-job; read line < " + go + "; echo bye-from-the-job"});
  ASSERT_EQ(started.exitCode(), 0) << started.err;
  std::string lease(text::trim(started.out));
  ASSERT_EQ(lease.size(), 12u) << started.out << started.err;
  EXPECT_NE(
      started.err.find("tally run: lease " + lease + " granted (one); detached as tally-job-"),
      std::string::npos)
      << started.err;
  EXPECT_NE(
      started.err.find("tally run: output: tally logs " + lease + " (or journalctl -u tally-job-"),
      std::string::npos)
      << started.err;
  // The client has exited; the job runs on, as its own service.
  json s = leaseWhen(lease, [](const json& l) { return l.value("state", "") == "running"; });
  EXPECT_EQ(s["state"], "running") << s.dump(2);
  std::string jobUnit = s["attributes"]["job_unit"];
  EXPECT_EQ(shellOut("systemctl is-active " + jobUnit), "active");
  ASSERT_TRUE(eventually([&] {
    return tally({"logs", lease}).out.find("hello-from-the-job") != std::string::npos;
  }));
  writeFile(go, "go\n");  // opens once the job reads: it is waiting there
  ASSERT_TRUE(eventually([&] { return kinds(lease).back() == "outcome"; }, 30s));
  json outcome = ledgerRows(lease).back()["body"];
  EXPECT_EQ(outcome["outcome"]["class"], "exited") << outcome.dump(2);
  EXPECT_EQ(outcome["outcome"]["exit_code"], 0) << outcome.dump(2);
  ASSERT_TRUE(eventually([&] {
    return tally({"logs", lease}).out.find("bye-from-the-job") != std::string::npos;
  }));  // an ended job's output stays readable by its lease id

  // Release stops a detached job like any run lease; its service goes too.
  auto second = tally({"run", "--pool", "one", "--detach", "--", "sleep", "600"});
  ASSERT_EQ(second.exitCode(), 0) << second.err;
  std::string id(text::trim(second.out));
  json t = leaseWhen(id, [](const json& l) { return l.value("state", "") == "running"; });
  std::string unit2 = t["attributes"]["job_unit"];
  ASSERT_EQ(tally({"lease", "release", id}).exitCode(), 0);
  ASSERT_TRUE(eventually([&] { return kinds(id).back() == "outcome"; }, 30s));
  EXPECT_EQ(ledgerRows(id).back()["body"]["outcome"]["class"], "stopped");
  EXPECT_TRUE(eventually([&] { return shellOut("systemctl is-active " + unit2) != "active"; }));

  // Not a detached job: said, not guessed.
  auto fg = tally({"run", "--pool", "one", "--", "true"});
  ASSERT_EQ(fg.exitCode(), 0) << fg.err;
  EXPECT_NE(fg.err.find("this job ends if this terminal goes"), std::string::npos) << fg.err;
  expectChainIntact();
}

}  // namespace
}  // namespace tally

namespace tally {
namespace {

// A real podman container (podman 4.3.1, no image: --rootfs over the VM's
// own /usr) holding a GTT buffer: its processes sit in podman's nested
// .../libpod-<id>.scope/container cgroup. tally attach --container leases
// the whole scope by name; the pair (its scope by --cgroup, its
// process by --pid) can no longer lease it twice.
TEST_F(VmDaemon, APodmanContainerIsLeasedOnceByNameNeverTwiceByPath) {
  setCharging(false);
  ASSERT_EQ(shell("command -v podman >/dev/null"), 0)
      << "podman is missing: scripts/install-deps.sh installs it";
  // Image-less storage the VM's overlay root can hold.
  writeFile("/etc/containers/storage.conf",
            "[storage]\ndriver = \"vfs\"\nrunroot = \"/run/containers/storage\"\n"
            "graphroot = \"/var/lib/containers/storage\"\n");
  std::string root = dir + "/ctr-root";
  // The workload is mounted where the build put it (CI's checkout is not under /work).
  std::string bin = std::filesystem::path(kWorkload).parent_path().string();
  ASSERT_EQ(shell("mkdir -p " + root + "/usr " + root + "/etc " + root + bin + " " + root +
                  "/dev " + root + "/proc " + root + "/sys " + root + "/tmp " + root + "/run " +
                  root + dir + " && ln -s usr/lib " + root + "/lib && ln -s usr/lib64 " + root +
                  "/lib64 && ln -s usr/bin " + root + "/bin"),
            0);
  std::string ctr = "comfyui-" + std::to_string(::getpid());
  auto cleanup = [&] { shell("podman rm -f -t 0 " + ctr + " >/dev/null 2>&1"); };
  ASSERT_EQ(shell("podman run -d --name " + ctr +
                  " --network none --device /dev/dri/renderD128 -v /usr:/usr:ro -v " + bin + ":" +
                  bin + ":ro -v /etc:/etc:ro -v " + dir + ":" + dir + " --rootfs " + root + " " +
                  kWorkload + " gpu gtt 16 1 600000 " + dir + "/ctr.ready >/dev/null"),
            0);
  ASSERT_TRUE(ready(dir + "/ctr.ready"));
  std::string pid = shellOut("podman inspect -f '{{.State.Pid}}' " + ctr);
  std::string id = shellOut("podman inspect -f '{{.Id}}' " + ctr);
  std::string scope = "/machine.slice/libpod-" + id + ".scope";
  EXPECT_EQ(shellOut("cat /proc/" + pid + "/cgroup"), "0::" + scope + "/container");
  startDaemon();

  auto a = tally({"attach", "--container", ctr, "--pool", "gpu", "--memory-max", "256M",
                  "--gpu-memory-max", "1G", "--json"});
  ASSERT_EQ(a.exitCode(), 0) << a.err;
  json lease = json::parse(a.out);
  std::string leaseId = lease["lease"];
  EXPECT_EQ(lease["name"], ctr);      // named as podman names it
  EXPECT_EQ(lease["cgroup"], scope);  // the whole container, not its nested part
  EXPECT_EQ(lease["target"]["container"]["id"], id) << lease.dump(2);
  json s = leaseWhen(leaseId, [](const json& l) {
    return l.contains("gpu") && l["gpu"].value("samples", 0) >= 1;
  });
  EXPECT_EQ(s["gpu"]["current_bytes"], 16 * kMiB) << s.dump(2);
  EXPECT_EQ(shellOut("cat /sys/fs/cgroup" + scope + "/memory.max"), "268435456");

  // The pair the issue found: its process (in .../container) and its scope.
  auto byPid = tally(
      {"attach", "--pid", pid, "--pool", "gpu", "--gpu-memory-max", "1G", "--memory-max", "256M"});
  EXPECT_EQ(byPid.exitCode(), 5) << byPid.err;
  EXPECT_NE(byPid.err.find("is inside " + scope + ", which lease " + leaseId + " (" + ctr +
                           ") already holds"),
            std::string::npos)
      << byPid.err;
  auto byScope = tally({"attach", "--cgroup", scope, "--pool", "gpu", "--gpu-memory-max", "1G",
                        "--memory-max", "256M"});
  EXPECT_EQ(byScope.exitCode(), 5) << byScope.err;
  EXPECT_NE(byScope.err.find(leaseId), std::string::npos) << byScope.err;

  // podman stop: the container's cgroup empties, the lease ends.
  ASSERT_EQ(shell("podman stop -t 1 " + ctr + " >/dev/null"), 0);
  ASSERT_TRUE(eventually([&] { return kinds(leaseId).back() == "outcome"; }, 30s));
  json outcome = ledgerRows(leaseId).back()["body"];
  EXPECT_EQ(outcome["outcome"]["class"], "ended") << outcome.dump(2);
  EXPECT_EQ(outcome["gpu"]["peak_bytes"], 16 * kMiB);
  cleanup();
  expectChainIntact();
}

// The red team's attacks on a real daemon under systemd (issue 25's "Why"),
// kept as tests so they stay fixed. A suite of its own: it runs on 6.12 with
// the whole VM suite (scripts/test.sh), the kernel-facing suites on every kernel.
class VmRedTeam : public VmDaemon {};

// A run lease's client that enforces nothing and reports a tidy ending: the
// daemon kills the workload over its gpu_memory_max itself, the outcome is
// the daemon's (its figures, its kill), the client's claim is kept as the
// client's, and the kill is one journal entry however many report it.
TEST_F(VmRedTeam, ARunLeaseWhoseClientEnforcesNothingIsKilledByTheDaemonAndRecordedAsItWas) {
  setCharging(false);
  startDaemon();
  Raw client(socket);
  ASSERT_TRUE(client.connected());
  json a = client.call({{"v", 1},
                        {"id", 1},
                        {"method", "acquire"},
                        {"params",
                         {{"pools", {"gpu"}},
                          {"memory_max", 256 * kMiB},
                          {"gpu_memory_max", 16 * kMiB},
                          {"name", "liar"}}}});
  ASSERT_TRUE(a.value("ok", false)) << a;
  std::string lease = a["result"]["lease"];
  std::string cg = "/tally-" + lease + ".scope";
  ASSERT_EQ(::mkdir(("/sys/fs/cgroup" + cg).c_str(), 0755), 0);
  writeFile("/sys/fs/cgroup" + cg + "/memory.max", std::to_string(256 * kMiB));  // as declared
  // 64 MiB of GTT against 16 MiB declared; held a minute unless killed.
  auto workload = spawnProgram({"sh", "-c",
                                "echo $$ > /sys/fs/cgroup" + cg + "/cgroup.procs && exec " +
                                    kWorkload + " gpu gtt 32 2 60000 " + dir + "/w.ready"});
  ASSERT_TRUE(ready(dir + "/w.ready"));
  json started = client.call(
      {{"v", 1}, {"id", 2}, {"method", "started"}, {"params", {{"lease", lease}, {"cgroup", cg}}}});
  ASSERT_TRUE(started.value("ok", false)) << started;
  auto ended = waitProgram(workload);  // the daemon's kill, or a minute
  ASSERT_TRUE(WIFSIGNALED(ended.waitStatus)) << "the workload was not killed: " << ended.err;
  EXPECT_EQ(WTERMSIG(ended.waitStatus), SIGKILL);
  // The client reports the same kill after the fact, then a clean exit.
  json kill = {{"kind", "gpu-memory-kill"},
               {"bytes", 64 * kMiB},
               {"limit", 16 * kMiB},
               {"samples", 2},
               {"summary", "killed by tally: the client's words"}};
  EXPECT_TRUE(client
                  .call({{"v", 1},
                         {"id", 3},
                         {"method", "bound"},
                         {"params", {{"lease", lease}, {"event", kill}}}})
                  .value("ok", false));
  json claimed = {
      {"schema", 1},
      {"lease", {{"id", lease}}},
      {"gpu", {{"peak_bytes", 0}}},
      {"outcome", {{"class", "exited"}, {"exit_code", 0}, {"summary", "exited with code 0"}}}};
  json done = client.call({{"v", 1},
                           {"id", 4},
                           {"method", "complete"},
                           {"params", {{"lease", lease}, {"record", claimed}}}});
  ASSERT_TRUE(done.value("ok", false)) << done;
  json outcome = ledgerRows(lease).back()["body"];
  EXPECT_EQ(outcome["outcome"]["class"], "killed-by-tally") << outcome.dump(2);
  EXPECT_EQ(outcome["outcome"]["summary"].get<std::string>().rfind(
                "killed by tally: GPU memory 64.0 MiB over gpu_memory_max 16.0 MiB", 0),
            0u)
      << outcome.dump(2);
  EXPECT_EQ(outcome["gpu"]["peak_bytes"], 64 * kMiB) << "the daemon's samples, not the claim";
  EXPECT_EQ(outcome["client"]["outcome"]["class"], "exited");
  EXPECT_EQ(outcome["outcome"]["wait_status_from"], "client");
  std::string kills = shellOut("journalctl --no-pager -o cat TALLY_LEASE=" + lease +
                               " TALLY_EVENT=gpu-memory-kill | wc -l");
  EXPECT_EQ(kills, "1") << "one kill, one journal entry";
  ::rmdir(("/sys/fs/cgroup" + cg).c_str());
  expectChainIntact();
}

// What a procfs meter cannot see, the kernel's charge does: a thread with its
// own fd table, a leader that exited, a DRM fd parked in a socket. Each run
// lease asks for 4 x 32 MiB of GTT under gpu_memory_max 64 MiB: two buffers
// are made, the two that would cross are refused (ENOMEM) and the workload
// runs on; the daemon's figure is the 64 MiB it holds, never more, never 0.
TEST_F(VmRedTeam, TheHidingTricksAreChargedInFullAndRefusedAtTheBound) {
  setCharging(false);
  startDaemon();
  for (std::string trick : {"own-fd-table", "exited-leader", "parked-fd"}) {
    SCOPED_TRACE(trick);
    std::string ready = dir + "/" + trick + ".ready", release = dir + "/" + trick + ".release";
    auto run = spawnProgram(
        {kTally, "run", "--pool", "gpu", "--memory-max", "256M", "--gpu-memory-max", "64M",
         "--name", "hide-" + trick, "--", kWorkload, "hide", trick, "32", "4", ready, release},
        {"TALLY_SOCKET=" + socket});
    ASSERT_TRUE(this->ready(ready)) << readFile(run.errPath);
    EXPECT_EQ(readFile(ready), "created=2 refused=2") << "the crossing allocations are refused";
    std::string lease = leaseNamed("hide-" + trick, "running");
    ASSERT_FALSE(lease.empty());
    // The daemon's seat for it: the charge, fdinfo's 0 beside it, the refusals.
    json seat;
    eventually(
        [&] {
          json all = json::parse(tally({"seats", "--json"}).out, nullptr, false);
          if (!all.is_object()) return false;
          for (const auto& st : all["seats"])
            if (st.value("lease", "") == lease) seat = st;
          return seat.is_object() && seat["gpu"].value("allocations_refused", 0) == 2;
        },
        30s);
    ASSERT_TRUE(seat.is_object());
    EXPECT_EQ(seat["gpu"]["allocations_refused"], 2) << seat.dump(2);
    EXPECT_EQ(seat["gpu"]["current_bytes"], 64 * kMiB) << seat.dump(2);
    EXPECT_EQ(seat["gpu"]["source"], "kernel-charge") << seat.dump(2);
    writeFile(release, "");
    auto ended = waitProgram(run);
    EXPECT_EQ(ended.exitCode(), 0) << ended.err;
    // The client's own line says what only the daemon saw: the kernel's peak and refusals.
    EXPECT_NE(ended.err.find("; GPU peak 64.0 MiB (charged in the kernel to the buffers it "
                             "created); 2 GPU allocations refused at its bound (64.0 MiB), never "
                             "over gpu_memory_max 64.0 MiB"),
              std::string::npos)
        << ended.err;
    ASSERT_TRUE(eventually([&] { return kinds(lease).back() == "outcome"; }, 15s));
    json outcome = ledgerRows(lease).back()["body"];
    EXPECT_EQ(outcome["outcome"]["class"], "exited") << outcome.dump(2);
    EXPECT_EQ(outcome["gpu"]["peak_bytes"], 64 * kMiB) << outcome.dump(2);
    EXPECT_EQ(outcome["gpu"]["kernel_charge"]["allocations_refused"], 2) << outcome.dump(2);
    EXPECT_EQ(outcome["gpu"]["kernel_charge"]["refused_bytes"], 64 * kMiB) << outcome.dump(2);
    // The refusals are gpu-bound rows of kind refused, each said once in the
    // journal. Both refusals seen in one tick make one row; else the second
    // waits for the lease's end (one line a minute at most per lease), so the
    // rows are one or two, and they add up to both refusals.
    std::uint64_t rows = 0, refusals = 0, refusedBytes = 0;
    for (const auto& r : ledgerRows(lease)) {
      if (r["kind"] != "gpu-bound" || r["body"]["kind"] != "refused") continue;
      ++rows;
      refusals += r["body"].value("samples", std::uint64_t{0});
      refusedBytes += r["body"].value("bytes", std::uint64_t{0});
    }
    EXPECT_GE(rows, 1u) << ledgerRows(lease).dump(2);
    EXPECT_EQ(refusals, 2u) << ledgerRows(lease).dump(2);
    EXPECT_EQ(refusedBytes, 64 * kMiB) << ledgerRows(lease).dump(2);
    std::string said = "journalctl --no-pager -o cat TALLY_EVENT=refused TALLY_LEASE=" + lease;
    EXPECT_TRUE(eventually([&] { return shellOut(said + " | wc -l") == std::to_string(rows); }))
        << "one journal line per refused row: " << shellOut(said);
  }
  auto metrics = tally({"metrics"});
  EXPECT_NE(metrics.out.find("tally_kernel_charge_active{mode=\"refusing\"} 1"), std::string::npos)
      << metrics.out;
  expectChainIntact();
}

// kill -9 of the daemon while leases hold charged buffers: systemd restarts
// it, every lease is re-armed with the charge the kernel kept (a hidden
// 64 MiB is still 64 MiB, not the 0 fdinfo shows), and the bound holds
// through the gap and after it: the crossing allocation made after the
// restart is refused and recorded by the new daemon.
TEST_F(VmRedTeam, Kill9OfTheDaemonReArmsEveryLeaseWithItsChargeIntact) {
  setCharging(false);
  startDaemon();
  std::string hiddenReady = dir + "/hidden.ready", hiddenRelease = dir + "/hidden.release";
  auto hidden = spawnProgram(
      {kTally, "run", "--pool", "gpu", "--memory-max", "256M", "--gpu-memory-max", "64M", "--name",
       "hidden", "--", kWorkload, "hide", "exited-leader", "32", "2", hiddenReady, hiddenRelease},
      {"TALLY_SOCKET=" + socket});
  std::string stepReady = dir + "/step.ready", go = dir + "/step.go";
  auto stepper = spawnProgram(
      {kTally, "run",    "--pool",  "gpu", "--memory-max",   "256M", "--gpu-memory-max",
       "64M",  "--name", "stepper", "--",  kWorkload,        "step", "gtt",
       "48",   "32",     stepReady, go,    dir + "/crossed", "0"},
      {"TALLY_SOCKET=" + socket});
  ASSERT_TRUE(ready(hiddenReady)) << readFile(hidden.errPath);
  EXPECT_EQ(readFile(hiddenReady), "created=2 refused=0");
  ASSERT_TRUE(ready(stepReady)) << readFile(stepper.errPath);
  std::string hiddenLease = leaseNamed("hidden", "running");
  std::string stepLease = leaseNamed("stepper", "running");
  ASSERT_FALSE(hiddenLease.empty());
  ASSERT_FALSE(stepLease.empty());
  auto figure = [&](const std::string& lease, std::uint64_t bytes) {
    return leaseWhen(lease, [&](const json& l) {
      return l.value("readopted_after_restart", false) && l.contains("gpu") &&
             l["gpu"].value("current_bytes", json()) == bytes;
    });
  };

  ASSERT_TRUE(killAndAwaitRestart());
  json h = figure(hiddenLease, 64 * kMiB);
  EXPECT_EQ(h["gpu"]["current_bytes"], 64 * kMiB) << "the kernel kept the charge\n" << h.dump(2);
  EXPECT_EQ(h["gpu"]["source"], "kernel-charge") << h.dump(2);
  // The leader exited; the thread that holds the fd is walked in its own
  // right (task/<tid>/fd: kcmp cannot compare a zombie leader's table), so
  // even the fallback meter sees what the kernel charged.
  EXPECT_EQ(h["gpu"]["fdinfo_bytes"], 64 * kMiB) << h.dump(2);
  json st = figure(stepLease, 48 * kMiB);
  EXPECT_EQ(st["gpu"]["source"], "kernel-charge") << st.dump(2);

  // After the restart, the re-armed bound refuses the crossing allocation.
  writeFile(go, "");
  auto stepped = waitProgram(stepper);
  EXPECT_NE(stepped.exitCode(), 0) << "its second buffer was refused";
  EXPECT_NE(stepped.err.find("create: Cannot allocate memory"), std::string::npos) << stepped.err;
  ASSERT_TRUE(eventually([&] { return kinds(stepLease).back() == "outcome"; }, 15s));
  bool refusedRow = false;
  for (const auto& r : ledgerRows(stepLease))
    refusedRow = refusedRow || (r["kind"] == "gpu-bound" && r["body"]["kind"] == "refused" &&
                                r["body"].value("bytes", 0) == 32 * kMiB);
  EXPECT_TRUE(refusedRow) << ledgerRows(stepLease).dump(2);
  json outcome = ledgerRows(stepLease).back()["body"];
  EXPECT_EQ(outcome["gpu"]["peak_bytes"], 48 * kMiB) << "never over its bound\n" << outcome.dump(2);
  writeFile(hiddenRelease, "");
  EXPECT_EQ(waitProgram(hidden).exitCode(), 0);
  expectChainIntact();
}

// A kernel booted without the BPF LSM (lsm= leaves bpf out; scripts/test.sh
// boots one for this suite alone): the charge still meters (fentry needs no
// LSM), nothing is refused, the sampled kill bounds the lease on the
// kernel's figure, and doctor and the metrics say why refusing is off.
class VmNoBpfLsm : public VmDaemon {
 protected:
  void SetUp() override {
    if (readFile("/sys/kernel/security/lsm").find("bpf") != std::string::npos)
      GTEST_SKIP() << "needs a boot whose lsm= leaves bpf out: vm/run.sh --append "
                      "lsm=capability,yama -- tally_vm_tests --gtest_filter='VmNoBpfLsm.*' "
                      "(scripts/test.sh runs it)";
    VmDaemon::SetUp();
  }
};

TEST_F(VmNoBpfLsm, TheSampledKillBoundsTheLeaseOnTheKernelsChargeAndDoctorSaysWhy) {
  auto doctor = tally({"doctor"});
  EXPECT_NE(doctor.out.find("refusing off: the BPF LSM is not active"), std::string::npos)
      << doctor.out;
  EXPECT_NE(doctor.out.find(",bpf to the kernel command line"), std::string::npos) << doctor.out;
  setCharging(false);
  startDaemon();
  // Four 32 MiB buffers under 64 MiB, none refused: the daemon kills the
  // lease on the kernel's figure (fdinfo sees nothing through the own fd table).
  auto run = spawnProgram({kTally, "run", "--pool", "gpu", "--memory-max", "256M",
                           "--gpu-memory-max", "64M", "--name", "unrefused", "--", kWorkload,
                           "hide", "own-fd-table", "32", "4", dir + "/ready", dir + "/release"},
                          {"TALLY_SOCKET=" + socket});
  auto ended = waitProgram(run);
  EXPECT_EQ(ended.exitCode(), 137) << ended.err;
  std::string lease;
  ASSERT_TRUE(eventually([&] {
    json all = json::parse(tally({"ledger", "export", "--config", config}).out, nullptr, false);
    for (const auto& row : all)
      if (row["kind"] == "outcome" && row["body"]["lease"].value("name", "") == "unrefused")
        lease = row["lease"];
    return !lease.empty();
  }));
  json outcome = ledgerRows(lease).back()["body"];
  EXPECT_EQ(outcome["outcome"]["class"], "killed-by-tally") << outcome.dump(2);
  EXPECT_NE(outcome["outcome"]["summary"].get<std::string>().find(
                "over gpu_memory_max 64.0 MiB (kernel-charge"),
            std::string::npos)
      << "the hidden buffers are seen all the same\n"
      << outcome.dump(2);
  EXPECT_GT(outcome["gpu"]["peak_bytes"].get<std::uint64_t>(), 64 * kMiB)
      << "nothing refused the crossing allocation\n"
      << outcome.dump(2);
  EXPECT_EQ(outcome["gpu"]["kernel_charge"]["allocations_refused"], 0) << outcome.dump(2);
  auto metrics = tally({"metrics"});
  EXPECT_NE(metrics.out.find("tally_kernel_charge_active{mode=\"charging\"} 1"), std::string::npos)
      << metrics.out;
  EXPECT_NE(metrics.out.find("tally_kernel_charge_active{mode=\"refusing\"} 0"), std::string::npos)
      << metrics.out;
}

// The crash that outlived restarts: a cgroup chain 1,500 levels deep under
// an attached lease once overflowed the scanner's stack, and every restart
// re-adopted it and crashed again. Refused at attach, naming the limit; one
// that grows after attach leaves the GPU figure unknown and the daemon runs on.
TEST_F(VmRedTeam, AFifteenHundredLevelCgroupChainNeverCrashesTheDaemon) {
  // The procfs meter's own depth rule is under test: the kernel's charge
  // (which keeps the figure known at any depth) is off.
  writeFile(config, std::regex_replace(readFile(config), std::regex("\\[daemon\\]\\n"),
                                       "[daemon]\nkernel_charge = false\n"));
  startDaemon();
  const std::string top = "/redteam-" + std::to_string(::getpid());
  const std::string root = "/sys/fs/cgroup" + top;
  std::string chain = root;
  for (int i = 0; i < 1500; ++i) chain += "/d";
  ASSERT_EQ(shell("mkdir -p " + chain), 0);
  auto holder = spawnProgram({"sh", "-c", "echo $$ > " + root + "/cgroup.procs && exec sleep 600"});
  ASSERT_TRUE(eventually([&] { return readFile(root + "/cgroup.procs").size() > 1; }));
  const std::string pid = shellOut("systemctl show -P MainPID " + unit);
  auto refused = tally({"attach", "--cgroup", top, "--pool", "gpu", "--memory-max", "256M",
                        "--gpu-memory-max", "1G"});
  EXPECT_NE(refused.exitCode(), 0);
  EXPECT_NE(refused.err.find("is deeper than 64 levels"), std::string::npos) << refused.err;
  // Grown after attach: the lease stays, its GPU figure is unknown with the reason.
  const std::string shallow = top + "-grows";
  ASSERT_EQ(shell("mkdir /sys/fs/cgroup" + shallow), 0);
  auto grower = spawnProgram(
      {"sh", "-c", "echo $$ > /sys/fs/cgroup" + shallow + "/cgroup.procs && exec sleep 600"});
  ASSERT_TRUE(eventually(
      [&] { return readFile("/sys/fs/cgroup" + shallow + "/cgroup.procs").size() > 1; }));
  auto a = tally({"attach", "--cgroup", shallow, "--pool", "gpu", "--memory-max", "256M",
                  "--gpu-memory-max", "1G"});
  ASSERT_EQ(a.exitCode(), 0) << a.err;
  std::string lease = a.out.substr(0, 12);
  std::string deep = "/sys/fs/cgroup" + shallow;
  for (int i = 0; i < 1500; ++i) deep += "/d";
  ASSERT_EQ(shell("mkdir -p " + deep), 0);
  json seen = leaseWhen(lease, [](const json& l) {
    return l.value("gpu", json::object()).value("unknown", "").find("deeper than 64 levels") !=
           std::string::npos;
  });
  EXPECT_NE(seen.dump().find("deeper than 64 levels"), std::string::npos) << seen.dump(2);
  // The same daemon, never restarted, still answering.
  EXPECT_EQ(shellOut("systemctl show -P MainPID " + unit), pid);
  EXPECT_EQ(shellOut("systemctl show -P NRestarts " + unit), "0");
  EXPECT_EQ(tally({"leases"}).exitCode(), 0);
  ::kill(holder.pid, SIGKILL);
  ::kill(grower.pid, SIGKILL);
  waitProgram(holder);
  waitProgram(grower);
  ASSERT_TRUE(eventually([&] { return kinds(lease).back() == "outcome"; }, 30s));
  shell("find " + root + " /sys/fs/cgroup" + shallow +
        " -depth -type d -exec rmdir {} + 2>/dev/null");
  expectChainIntact();
}

// The kernel's lease lookup walks a task's cgroup ancestors in the first 64
// levels: a lease whose own cgroup sits deeper would be armed and never
// charged nor refused, so it is refused at grant with the reason (before: a
// user attached her own cgroup at level 71, and its GPU peak read 0).
TEST_F(VmRedTeam, ALeaseDeeperThanTheKernelChargeLooksIsRefusedAtGrantWithTheReason) {
  setCharging(false);
  startDaemon();
  const std::string top = "/vmd-deep-" + std::to_string(::getpid());
  std::string rel = top;
  for (int i = 0; i < 70; ++i) rel += "/d";  // level 71
  ASSERT_EQ(shell("mkdir -p /sys/fs/cgroup" + rel), 0);
  auto holder = spawnProgram(
      {"sh", "-c", "echo $$ > /sys/fs/cgroup" + rel + "/cgroup.procs && exec sleep 600"});
  ASSERT_TRUE(
      eventually([&] { return readFile("/sys/fs/cgroup" + rel + "/cgroup.procs").size() > 1; }));
  auto a = tally({"attach", "--cgroup", rel, "--pool", "gpu", "--memory-max", "256M",
                  "--gpu-memory-max", "64M"});
  EXPECT_EQ(a.exitCode(), 5) << a.out << a.err;
  EXPECT_NE(a.err.find("71 levels deep: the in-kernel GPU charge finds a lease in the first 64 "
                       "levels only"),
            std::string::npos)
      << a.err;
  EXPECT_EQ(json::parse(tally({"leases", "--json"}).out, nullptr, false), json::array());
  ::kill(holder.pid, SIGKILL);
  waitProgram(holder);
  shell("find /sys/fs/cgroup" + top + " -depth -type d -exec rmdir {} + 2>/dev/null");
}

// Release, then attach the same live workload again (the way to change a
// bound): its charge is carried, so the new lease's figure is what the
// workload holds, and freeing it afterwards takes the charge to zero, never
// below (before: the re-attach started from zero, and the free wrapped it).
TEST_F(VmRedTeam, ReleaseAndAttachAgainCarriesTheChargeAndAFreeNeverWrapsIt) {
  setCharging(false);
  startDaemon();
  const std::string cg = "/vmd-reattach-" + std::to_string(::getpid());
  ASSERT_EQ(::mkdir(("/sys/fs/cgroup" + cg).c_str(), 0755), 0);
  auto holder = spawnProgram(
      {"sh", "-c", "echo $$ > /sys/fs/cgroup" + cg + "/cgroup.procs && exec sleep 600"});
  ASSERT_TRUE(
      eventually([&] { return readFile("/sys/fs/cgroup" + cg + "/cgroup.procs").size() > 1; }));
  auto first = tally({"attach", "--cgroup", cg, "--pool", "gpu", "--memory-max", "256M",
                      "--gpu-memory-max", "64M", "--name", "model", "--json"});
  ASSERT_EQ(first.exitCode(), 0) << first.err;
  std::string lease1 = json::parse(first.out)["lease"];
  // Buffers made under the lease, hidden from fdinfo (the leader exits).
  std::string ready = dir + "/hide.ready", release = dir + "/hide.release";
  auto hider = spawnProgram({"sh", "-c",
                             "echo $$ > /sys/fs/cgroup" + cg + "/cgroup.procs && exec " +
                                 kWorkload + " hide exited-leader 16 2 " + ready + " " + release});
  ASSERT_TRUE(this->ready(ready));
  EXPECT_EQ(readFile(ready), "created=2 refused=0");
  json s1 = leaseWhen(lease1, [](const json& l) {
    return l.contains("gpu") && l["gpu"].value("current_bytes", json()) == 32 * kMiB;
  });
  ASSERT_EQ(s1["gpu"]["current_bytes"], 32 * kMiB) << s1.dump(2);
  ASSERT_EQ(tally({"lease", "release", lease1}).exitCode(), 0);
  ASSERT_TRUE(eventually([&] { return kinds(lease1).back() == "outcome"; }, 15s));
  auto second = tally({"attach", "--cgroup", cg, "--pool", "gpu", "--memory-max", "256M",
                       "--gpu-memory-max", "48M", "--name", "model", "--json"});
  ASSERT_EQ(second.exitCode(), 0) << second.err;
  std::string lease2 = json::parse(second.out)["lease"];
  json s2 = leaseWhen(lease2, [](const json& l) {
    return l.contains("gpu") && l["gpu"].value("samples", 0) >= 1 &&
           l["gpu"].value("current_bytes", json()) == 32 * kMiB;
  });
  EXPECT_EQ(s2["gpu"]["current_bytes"], 32 * kMiB) << "carried: what the workload holds\n"
                                                   << s2.dump(2);
  EXPECT_EQ(s2["gpu"]["source"], "kernel-charge") << s2.dump(2);
  // Freed: zero, not a wrapped figure that kills the lease.
  writeFile(release, "");
  waitProgram(hider);
  json s3 = leaseWhen(lease2, [](const json& l) {
    return l.contains("gpu") && l["gpu"].value("current_bytes", json()) == 0;
  });
  EXPECT_EQ(s3["gpu"]["current_bytes"], 0) << s3.dump(2);
  EXPECT_EQ(s3["state"], "running") << "never killed for a wrapped charge";
  ::kill(holder.pid, SIGKILL);
  waitProgram(holder);
  ASSERT_TRUE(eventually([&] { return kinds(lease2).back() == "outcome"; }, 30s));
  json outcome = ledgerRows(lease2).back()["body"];
  EXPECT_EQ(outcome["outcome"]["class"], "ended") << outcome.dump(2);
  EXPECT_LE(outcome["gpu"]["peak_bytes"].get<std::uint64_t>(), 48 * kMiB) << outcome.dump(2);
  ::rmdir(("/sys/fs/cgroup" + cg).c_str());
  expectChainIntact();
}

// A lease's buffers passed to a process outside every lease, the lease then
// ended: they are said and recorded as held by the ended lease, count against
// its pool's GPU budget, and are said and recorded again once freed (before:
// charged to no one).
TEST_F(VmRedTeam, BuffersPassedOnAndTheCreatorEndedStayCountedUntilFreed) {
  setCharging(false);
  startDaemon();
  std::string sock = dir + "/take.sock", taken = dir + "/take.ready",
              release = dir + "/take.release";
  auto taker = spawnProgram({kWorkload, "take", sock, taken, release});
  ASSERT_TRUE(ready(taken + ".listening"));
  auto run = tally({"run", "--pool", "gpu", "--memory-max", "256M", "--gpu-memory-max", "64M",
                    "--name", "giver", "--", kWorkload, "give", sock, "16", "2"});
  ASSERT_EQ(run.exitCode(), 0) << run.err;
  ASSERT_TRUE(ready(taken));
  std::string said = "journalctl --no-pager -o cat TALLY_EVENT=gpu-residue-ended-holding";
  ASSERT_TRUE(eventually([&] {
    return shellOut(said).find(
               "(giver) ended holding 32.0 MiB in 2 GPU "
               "buffers it created; they stay counted "
               "against pool gpu's GPU budget") != std::string::npos;
  })) << shellOut(said);
  json pools;
  ASSERT_TRUE(eventually(
      [&] {
        pools = json::parse(tally({"pools", "--json"}).out, nullptr, false);
        return pools.is_array() && !pools.empty() && [&] {
          for (const auto& p : pools)
            if (p.value("pool", "") == "gpu") return p.value("gpu_residue_bytes", 0u) == 32 * kMiB;
          return false;
        }();
      },
      20s))
      << pools.dump(2);
  auto status = tally({"daemon", "status"});
  EXPECT_NE(status.out.find("held by buffers of ended lease"), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("(giver): 32.0 MiB"), std::string::npos) << status.out;
  // Freed by whoever held them: said and recorded, the pool's residue gone.
  writeFile(release, "");
  waitProgram(taker);
  ASSERT_TRUE(eventually(
      [&] {
        return shellOut("journalctl --no-pager -o cat TALLY_EVENT=gpu-residue-freed")
                   .find("(giver) created are freed") != std::string::npos;
      },
      20s));
  auto rows = json::parse(tally({"ledger", "export", "--config", config}).out);
  std::vector<std::string> residue;
  for (const auto& r : rows)
    if (r["kind"] == "gpu-residue") residue.push_back(r["body"]["event"]);
  EXPECT_EQ(residue, (std::vector<std::string>{"ended-holding", "freed"}));
  expectChainIntact();
}

// A process that made buffers outside its lease and moved into it: only
// fdinfo shows them, and the lease's figure is never below what its own
// processes hold, so it is killed over its bound (the kernel counts the move,
// and the meter looks at once); a lasting gap is said with both figures.
TEST_F(VmRedTeam, AProcessMovedInWithBuffersMadeOutsideIsCountedAndKilledOverTheBound) {
  setCharging(false);
  startDaemon();
  const std::string cg = "/vmd-movedin-" + std::to_string(::getpid());
  const std::string out = cg + "-outside";
  for (const auto& c : {cg, out}) ASSERT_EQ(::mkdir(("/sys/fs/cgroup" + c).c_str(), 0755), 0);
  auto holder = spawnProgram(
      {"sh", "-c", "echo $$ > /sys/fs/cgroup" + cg + "/cgroup.procs && exec sleep 600"});
  ASSERT_TRUE(
      eventually([&] { return readFile("/sys/fs/cgroup" + cg + "/cgroup.procs").size() > 1; }));
  auto a = tally({"attach", "--cgroup", cg, "--pool", "gpu", "--memory-max", "256M",
                  "--gpu-memory-max", "64M", "--name", "mover", "--json"});
  ASSERT_EQ(a.exitCode(), 0) << a.err;
  std::string lease = json::parse(a.out)["lease"];
  std::string ready = dir + "/moved.ready";
  auto mover = spawnProgram({"sh", "-c",
                             "echo $$ > /sys/fs/cgroup" + out + "/cgroup.procs && exec " +
                                 kWorkload + " gpu gtt 32 3 60000 " + ready});
  ASSERT_TRUE(this->ready(ready));  // 96 MiB made outside the lease
  writeFile("/sys/fs/cgroup" + cg + "/cgroup.procs", std::to_string(mover.pid) + "\n");
  auto ended = waitProgram(mover);
  EXPECT_TRUE(WIFSIGNALED(ended.waitStatus)) << "killed over its bound";
  ASSERT_TRUE(eventually([&] { return kinds(lease).back() == "outcome"; }, 30s));
  json outcome = ledgerRows(lease).back()["body"];
  EXPECT_EQ(outcome["outcome"]["class"], "killed-by-tally") << outcome.dump(2);
  EXPECT_NE(outcome["outcome"]["summary"].get<std::string>().find(
                "GPU memory 96.0 MiB over gpu_memory_max 64.0 MiB (drm-fdinfo"),
            std::string::npos)
      << outcome.dump(2);
  ::kill(holder.pid, SIGKILL);
  waitProgram(holder);
  for (const auto& c : {cg, out}) ::rmdir(("/sys/fs/cgroup" + c).c_str());
  expectChainIntact();
}

}  // namespace
}  // namespace tally
