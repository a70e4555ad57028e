// tally daemon against a real systemd 252 (Type=notify service, watchdog,
// Restart=always after kill -9), real cgroup v2 and the test DRM driver:
// pools serialise `tally run --pool` clients, budgets refuse, attach meters a
// running service and a process's cgroup, and a daemon killed mid-lease
// re-adopts it and records its outcome exactly once. VM harness only.
// The fixture: daemon_fixture.h; declared units, detached jobs and podman
// containers: daemon_units_test.cpp; the red team's attacks: daemon_redteam_test.cpp.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <fstream>
#include <map>
#include <sstream>

#include "daemon_fixture.h"
#include "support/page_quotes.h"
#include "util/text.h"

namespace tally {
namespace {

using namespace tally::vmdaemon;

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
  // tally daemon status: what the daemon says of itself, the kernel charge
  // as this kernel allows it (the BPF LSM on: charging and refusing).
  auto said = tally({"daemon", "status"});
  ASSERT_EQ(said.exitCode(), 0) << said.err;
  bool bpfLsm = readFile("/sys/kernel/security/lsm").find("bpf") != std::string::npos;
  EXPECT_NE(said.out.find(bpfLsm ? "\nkernel charge: charging and refusing in the kernel (BPF)\n"
                                 : "\nkernel charge: off: "),
            std::string::npos)
      << said.out;
  EXPECT_NE(said.out.find("\nleases: 0 live, 0 queued; sampled every "), std::string::npos)
      << said.out;
  EXPECT_NE(said.out.find(" writes\n"), std::string::npos) << said.out;
  // It names the build `tally --version` names ("tally V (commit C)"), as
  // tally_build_info does.
  std::string version(text::trim(tally({"--version"}).out));
  ASSERT_EQ(version.rfind("tally ", 0), 0u) << version;
  EXPECT_NE(said.out.find(", " + version + ", up "), std::string::npos) << said.out << version;
  std::string metrics = tally({"metrics"}).out;
  EXPECT_NE(metrics.find("tally_build_info{version=\""), std::string::npos) << metrics;
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
  EXPECT_NE(tooBig.err.find("larger than pool gpu's whole GPU memory budget"), std::string::npos)
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
  expectPagesQuote({"docs/enforcement.md"}, "tests/vm/daemon_test.cpp#attach-over", refused.err);
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

// systemctl reload, as the shipped unit runs it (ExecReload = tally daemon
// reload): a raised capacity grants the waiter at once and says so; a
// change that would strand the running leases fails the reload, names them
// and changes nothing; SIGHUP reloads too, and the daemon never restarts.
TEST_F(VmDaemon, SystemctlReloadAppliesPoolsAndRefusesToStrandALiveLease) {
  ASSERT_EQ(shell("systemd-run --quiet --unit=" + unit +
                  " -p Type=notify -p WatchdogSec=20s -p Restart=always -p RestartSec=300ms"
                  " -p 'ExecReload=" +
                  kTally + " daemon reload --socket " + socket + "' " + kTally +
                  " daemon --config " + config),
            0);
  std::string mainPid = shellOut("systemctl show -p MainPID --value " + unit);
  // The workloads hold the pool until the test lets them go: each waits for
  // the lock the test holds (a barrier, not a clock).
  std::string gate = dir + "/gate";
  int gateFd = ::open(gate.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  ASSERT_GE(gateFd, 0);
  ASSERT_EQ(::flock(gateFd, LOCK_EX), 0);
  std::string body = "flock " + gate + " true";
  auto a = spawnProgram({kTally, "run", "--pool", "one", "--name", "first", "--", "sh", "-c", body},
                        {"TALLY_SOCKET=" + socket});
  ASSERT_FALSE(leaseNamed("first", "running").empty());
  auto b =
      spawnProgram({kTally, "run", "--pool", "one", "--name", "second", "--", "sh", "-c", body},
                   {"TALLY_SOCKET=" + socket});
  ASSERT_FALSE(leaseNamed("second", "queued").empty());

  std::string daemonTable = "[daemon]\nsocket = \"" + socket + "\"\nstate_dir = \"" + dir +
                            "/state\"\nsample_interval = \"200ms\"\nclient_grace = \"30s\"\n";
  std::string gpuPool =
      "[pools.gpu]\ncapacity = 4\ngpu_memory_budget = \"96GiB\"\n"
      "memory_budget = \"1GiB\"\n";
  writeFile(config, daemonTable + "[pools.one]\ncapacity = 2\n" + gpuPool);
  ASSERT_EQ(shell("systemctl reload " + unit), 0)
      << shellOut("journalctl --no-pager -n 30 -u " + unit);
  EXPECT_FALSE(leaseNamed("second", "running").empty());  // granted by the reload
  std::string journal = shellOut("journalctl --no-pager -o cat -u " + unit);
  EXPECT_NE(journal.find("config reload: pools.one.capacity 1 -> 2"), std::string::npos) << journal;

  // Pool one removed while two leases run in it: refused whole.
  writeFile(config, daemonTable + gpuPool);
  EXPECT_NE(shell("systemctl reload " + unit), 0);
  auto cli = tally({"daemon", "reload"});
  EXPECT_EQ(cli.exitCode(), 5) << cli.out << cli.err;
  EXPECT_NE(cli.err.find("it would strand live leases: pool one is removed but 2 leases are live "
                         "in it"),
            std::string::npos)
      << cli.err;
  auto pools = tally({"pools", "--json"});
  EXPECT_NE(pools.out.find("\"one\""), std::string::npos) << pools.out;

  // SIGHUP: the same reload, its result in the journal.
  writeFile(config, daemonTable + "[pools.one]\ncapacity = 3\n" + gpuPool);
  ASSERT_EQ(shell("systemctl kill -s HUP " + unit), 0);
  EXPECT_TRUE(eventually(
      [&] {
        return shellOut("journalctl --no-pager -o cat -u " + unit)
                   .find("config reload: pools.one.capacity 2 -> 3") != std::string::npos;
      },
      30s));
  EXPECT_EQ(shellOut("systemctl show -p MainPID --value " + unit), mainPid);
  EXPECT_EQ(shellOut("systemctl show -p ActiveState --value " + unit), "active");

  ::close(gateFd);  // the lock goes with it: both workloads end
  EXPECT_EQ(waitProgram(a).exitCode(), 0);
  EXPECT_EQ(waitProgram(b).exitCode(), 0);
  expectChainIntact();
}

}  // namespace
}  // namespace tally
