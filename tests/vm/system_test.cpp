// tally run against a real systemd 252 and a real cgroup v2 memory controller:
// these tests run only inside the project's VM harness (vm/run.sh), where
// systemd is PID 1 on a pure cgroup v2 hierarchy and the test DRM driver can be
// loaded. scripts/test.sh runs them there; outside it they refuse to start.
// Here tally run's bounds, signals, fallbacks and GPU meter; the kernel-facing
// subset: system_kernel_test.cpp. The fixture: system_fixture.h.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "support/page_quotes.h"
#include "system_fixture.h"

namespace tally {
namespace {

using namespace tally::vmsystem;

bool processGone(pid_t pid) {
  return eventually([&] { return ::kill(pid, 0) != 0 && errno == ESRCH; }, 5s);
}

TEST_F(VmSystem, AllocationOverMemoryMaxIsOomKilledAndNamed) {
  auto t = run({"--memory-max", "64M"}, {kWorkload, "hog", "200"});
  EXPECT_EQ(t.result.exitCode(), 137) << describe(t);
  EXPECT_EQ(t.record["outcome"]["class"], "oom-killed") << describe(t);
  EXPECT_GE(t.record["outcome"]["oom_kill"].get<int>(), 1);
  EXPECT_EQ(t.record["outcome"]["signal_name"], "SIGKILL");
  EXPECT_EQ(t.record["declared"]["memory_max"], 67108864);
  EXPECT_EQ(t.record["applied"]["memory_max"], 67108864);
  EXPECT_EQ(t.record["applied"]["memory_oom_group"], 1);
  EXPECT_EQ(t.record["lease"]["manager"], "system");
  EXPECT_GE(t.record["memory"]["events"]["oom_kill"].get<int>(), 1);
  EXPECT_NE(t.record["outcome"]["summary"].get<std::string>().find("MemoryMax=64.0 MiB"),
            std::string::npos);
  // The lease's scope and slice are gone afterwards.
  std::string slice = t.record["lease"]["slice"];
  EXPECT_NE(shell("systemctl is-active --quiet " + slice), 0);
}

TEST_F(VmSystem, WorkloadWithinBoundsExitsZeroWithPeakRecorded) {
  auto t =
      run({"--memory-max", "64M", "--sample-interval", "100ms"}, {kWorkload, "hog", "16", "300"});
  EXPECT_EQ(t.result.exitCode(), 0) << describe(t);
  EXPECT_EQ(t.record["outcome"]["class"], "exited");
  EXPECT_EQ(t.record["outcome"]["exit_code"], 0);
  EXPECT_GE(t.record["memory"]["peak_bytes"].get<std::uint64_t>(), 16 * kMiB) << describe(t);
  EXPECT_LE(t.record["memory"]["peak_bytes"].get<std::uint64_t>(), 64 * kMiB);
  EXPECT_EQ(t.record["memory"]["events"]["oom_kill"], 0);
  EXPECT_GE(t.record["memory"]["sampled"]["samples"].get<int>(), 1);
  // 16 MiB touched: 4096 pages faulted in, as 4 KiB faults or 2 MiB THP
  // faults (512 pages each), counted in the slice's final memory.stat.
  const auto& st = t.record["memory"]["stat_counters"];
  EXPECT_GE(
      st["pgfault"].get<std::uint64_t>() + 512 * st.value("thp_fault_alloc", std::uint64_t{0}),
      4096u)
      << describe(t);
  // Said as the workload is released, like systemd-run's "Running as unit".
  std::string id = t.record["lease"]["id"];
  EXPECT_NE(t.result.err.find("tally: lease " + id + " running as tally-" + id +
                              ".scope (MemoryMax=64.0 MiB)\n"),
            std::string::npos)
      << t.result.err;
  auto quiet = run({"--quiet"}, {"true"});
  EXPECT_EQ(quiet.result.err.find("running as"), std::string::npos) << quiet.result.err;
}

TEST_F(VmSystem, UndeclaredLimitsReadBackAsMax) {
  auto t = run({"--oom-policy", "continue"}, {"true"});
  EXPECT_EQ(t.result.exitCode(), 0) << describe(t);
  EXPECT_EQ(t.record["applied"]["memory_max"], "max");
  EXPECT_EQ(t.record["applied"]["memory_high"], "max");
  EXPECT_EQ(t.record["applied"]["memory_swap_max"], "max");
  EXPECT_EQ(t.record["applied"]["memory_oom_group"], 0);
}

TEST_F(VmSystem, OomPoliciesStopAndContinueLeaveOomGroupOff) {
  for (const char* policy : {"stop", "continue"}) {
    auto t = run({"--memory-max", "64M", "--oom-policy", policy}, {kWorkload, "hog", "200"});
    EXPECT_EQ(t.result.exitCode(), 137) << policy << describe(t);
    EXPECT_EQ(t.record["applied"]["memory_oom_group"], 0) << policy;
    EXPECT_EQ(t.record["declared"]["oom_policy"], policy);
    EXPECT_EQ(t.record["outcome"]["class"], "oom-killed") << policy << describe(t);
  }
}

TEST_F(VmSystem, HighAndSwapLimitsAreAppliedAndVerified) {
  auto t = run({"--memory-max", "96M", "--memory-high", "80M", "--memory-swap-max", "0"}, {"true"});
  EXPECT_EQ(t.result.exitCode(), 0) << describe(t);
  EXPECT_EQ(t.record["applied"]["memory_max"], 96 * kMiB);
  EXPECT_EQ(t.record["applied"]["memory_high"], 80 * kMiB);
  EXPECT_EQ(t.record["applied"]["memory_swap_max"], 0);
}

TEST_F(VmSystem, RefusedScopeNeverRunsTheWorkload) {
  std::string marker = "/tmp/tally-marker-refused-slice";
  auto t = run({"--slice", "a--b.slice"}, {kWorkload, "marker", marker});
  EXPECT_EQ(t.result.exitCode(), 125) << describe(t);
  EXPECT_EQ(t.record["outcome"]["class"], "containment-refused");
  EXPECT_NE(t.record["outcome"]["summary"].get<std::string>().find("refused the scope"),
            std::string::npos);
  EXPECT_FALSE(exists(marker)) << "the workload ran although containment was refused";
  // The same command with a valid slice does run: the marker test is live.
  auto ok = run({"--slice", "batch.slice"}, {kWorkload, "marker", marker});
  EXPECT_EQ(ok.result.exitCode(), 0) << describe(ok);
  EXPECT_TRUE(exists(marker));
  EXPECT_NE(ok.record["lease"]["cgroup"].get<std::string>().find("/batch.slice/batch-"),
            std::string::npos);
}

TEST_F(VmSystem, UserModeRefusedWithoutUserManagerThenRunsThroughUserAt0) {
  std::vector<std::string> env{"XDG_RUNTIME_DIR=/run/user/0",
                               "DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/0/bus"};
  std::string marker = "/tmp/tally-marker-no-user-manager";
  ASSERT_NE(shell("systemctl is-active --quiet user@0.service"), 0) << "user@0 must not run yet";
  auto refused = run({"--user"}, {kWorkload, "marker", marker}, env);
  EXPECT_EQ(refused.result.exitCode(), 125) << describe(refused);
  EXPECT_EQ(refused.record["outcome"]["class"], "containment-refused");
  EXPECT_NE(refused.record["outcome"]["summary"].get<std::string>().find("no user manager"),
            std::string::npos)
      << describe(refused);
  EXPECT_FALSE(exists(marker));

  ASSERT_EQ(shell("systemctl start user@0.service"), 0);
  auto t = run({"--user", "--memory-max", "64M"}, {kWorkload, "hog", "200"}, env);
  EXPECT_EQ(t.result.exitCode(), 137) << describe(t);
  EXPECT_EQ(t.record["lease"]["manager"], "user");
  EXPECT_NE(t.record["lease"]["cgroup"].get<std::string>().find("/user@0.service/"),
            std::string::npos);
  EXPECT_EQ(t.record["outcome"]["class"], "oom-killed");
  EXPECT_EQ(t.record["applied"]["memory_max"], 67108864);
}

TEST_F(VmSystem, SigtermToTallyStopsEveryProcessOfTheScope) {
  std::string pidfile = "/tmp/tally-tree.pids";
  ::unlink(pidfile.c_str());
  auto s = spawnProgram(
      {kTally, "run", "--json", "--state-dir", stateDir(), "--", kWorkload, "tree", pidfile});
  pid_t child = 0, grandchild = 0;
  eventually(
      [&] {
        std::ifstream in(pidfile);
        in >> child >> grandchild;
        return child && grandchild;
      },
      20s);
  ASSERT_TRUE(child && grandchild) << "the workload never wrote its pids";
  ASSERT_EQ(::kill(s.pid, SIGTERM), 0);
  auto r = waitProgram(s);
  EXPECT_EQ(r.exitCode(), 128 + SIGTERM) << r.err;
  auto record = json::parse(r.out, nullptr, false);
  ASSERT_FALSE(record.is_discarded()) << r.err;
  EXPECT_EQ(record["outcome"]["class"], "stopped");
  EXPECT_EQ(record["outcome"]["signal_name"], "SIGTERM");
  EXPECT_TRUE(processGone(child));
  EXPECT_TRUE(processGone(grandchild)) << "the forked grandchild survived the stop";
}

TEST_F(VmSystem, ExitCodesAndSignalsPropagate) {
  auto exited = run({}, {"sh", "-c", "exit 7"});
  EXPECT_EQ(exited.result.exitCode(), 7);
  EXPECT_EQ(exited.record["outcome"]["class"], "exited");
  EXPECT_EQ(exited.record["outcome"]["exit_code"], 7);

  auto signaled = run({}, {"sh", "-c", "kill -USR1 $$"});
  EXPECT_EQ(signaled.result.exitCode(), 128 + SIGUSR1);
  EXPECT_EQ(signaled.record["outcome"]["class"], "killed-by-signal");
  EXPECT_EQ(signaled.record["outcome"]["signal_name"], "SIGUSR1");

  auto killed = run({"--memory-max", "64M"}, {"sh", "-c", "kill -KILL $$"});
  EXPECT_EQ(killed.result.exitCode(), 137);
  EXPECT_EQ(killed.record["outcome"]["class"], "killed-by-signal")
      << "a SIGKILL without oom_kill is not an OOM";

  auto missing = run({}, {"/nonexistent/command"});
  EXPECT_EQ(missing.result.exitCode(), 127);
  EXPECT_EQ(missing.record["outcome"]["class"], "exec-failed");

  std::string plain = "/tmp/tally-not-executable";
  std::ofstream(plain) << "data\n";
  ::chmod(plain.c_str(), 0644);
  auto notExecutable = run({}, {plain});
  EXPECT_EQ(notExecutable.result.exitCode(), 126) << describe(notExecutable);
  EXPECT_EQ(notExecutable.record["outcome"]["class"], "exec-failed");
}

class VmCgroupfs : public VmSystem {
 protected:
  static constexpr const char* kParent = "/sys/fs/cgroup/tallydeleg";
  void SetUp() override {
    shell(std::string("mkdir -p ") + kParent + "/runner");
    ASSERT_EQ(shell(std::string("echo +memory > ") + kParent + "/cgroup.subtree_control"), 0);
  }
};

TEST_F(VmCgroupfs, ExplicitDelegatedSubtreeBoundsAndRemovesTheLease) {
  auto t = run({"--cgroupfs", "--cgroup-parent", "/tallydeleg", "--memory-max", "64M"},
               {kWorkload, "hog", "200"});
  EXPECT_EQ(t.result.exitCode(), 137) << describe(t);
  EXPECT_EQ(t.record["lease"]["manager"], "cgroupfs");
  EXPECT_EQ(t.record["outcome"]["class"], "oom-killed");
  EXPECT_EQ(t.record["applied"]["memory_max"], 67108864);
  std::string cgroup = t.record["lease"]["cgroup"];
  EXPECT_EQ(cgroup.rfind("/tallydeleg/tally-", 0), 0u) << cgroup;
  EXPECT_FALSE(exists("/sys/fs/cgroup" + cgroup)) << "the lease cgroup was left behind";
}

TEST_F(VmCgroupfs, NoManagerReachableFallsBackToTheDelegatedParent) {
  // tally runs in tallydeleg/runner; no system bus answers, so auto mode makes
  // the lease a sibling: tallydeleg/tally-<id>.
  std::string inner = "echo $$ > " + std::string(kParent) + "/runner/cgroup.procs && exec " +
                      kTally + " run --json --state-dir " + stateDir() + " --memory-max 32M -- " +
                      kWorkload + " hog 8 200";
  auto r = runProgram({"sh", "-c", inner}, {"DBUS_SYSTEM_BUS_ADDRESS=unix:path=/nonexistent/bus"});
  EXPECT_EQ(r.exitCode(), 0) << r.err;
  auto record = json::parse(r.out, nullptr, false);
  ASSERT_FALSE(record.is_discarded()) << r.err;
  EXPECT_EQ(record["lease"]["manager"], "cgroupfs");
  EXPECT_EQ(record["lease"]["cgroup"].get<std::string>().rfind("/tallydeleg/tally-", 0), 0u);
  EXPECT_GE(record["memory"]["peak_bytes"].get<std::uint64_t>(), 8 * kMiB);
  EXPECT_NE(r.err.find("no systemd system manager"), std::string::npos) << r.err;
}

TEST_F(VmCgroupfs, UndelegatedParentIsRefused) {
  shell(std::string("mkdir -p ") + kParent + "/plain");
  std::string marker = "/tmp/tally-marker-undelegated";
  auto t =
      run({"--cgroupfs", "--cgroup-parent", "/tallydeleg/plain"}, {kWorkload, "marker", marker});
  EXPECT_EQ(t.result.exitCode(), 125) << describe(t);
  EXPECT_NE(
      t.record["outcome"]["summary"].get<std::string>().find("memory controller not delegated"),
      std::string::npos)
      << describe(t);
  EXPECT_FALSE(exists(marker));
}

void setCharging(bool on) {
  std::ofstream("/sys/module/tally_testdrm/parameters/charge_memcg") << (on ? "1" : "0");
}

TEST_F(VmSystem, GttBuffersAreMeteredFromFdinfoAndNotChargedToday) {
  setCharging(false);
  // Report mode: over gpu_memory_max in a row, reported, never killed.
  auto t = run(
      {"--sample-interval", "100ms", "--gpu-memory-max", "32M", "--gpu-memory-action", "report"},
      {kWorkload, "gpu", "gtt", "16", "3", "1500"});
  EXPECT_EQ(t.result.exitCode(), 0) << describe(t);
  EXPECT_EQ(t.record["outcome"]["class"], "exited") << describe(t);
  EXPECT_GE(t.record["gpu"]["peak_bytes"].get<std::uint64_t>(), 48 * kMiB) << describe(t);
  EXPECT_EQ(t.record["gpu"]["at_peak"]["gtt"], 48 * kMiB);
  EXPECT_EQ(t.record["gpu"]["source"], "drm-fdinfo");
  const auto& bound = t.record["gpu"]["bound"];
  EXPECT_EQ(bound["action"], "report");
  EXPECT_GE(bound["samples_over_gpu_memory_max"].get<int>(), 2);
  ASSERT_EQ(bound["events"].size(), 1u) << describe(t);
  EXPECT_EQ(bound["events"][0]["kind"], "gpu-memory-max-exceeded");
  EXPECT_EQ(bound["events"][0]["bytes"], 48 * kMiB);
  // Today's amdgpu: the GTT pages are not in the cgroup's memory.peak.
  EXPECT_LT(t.record["memory"]["peak_bytes"].get<std::uint64_t>(), 48 * kMiB) << describe(t);
}

// The lease goes over gpu_memory_max: tally kills the whole lease at the
// second consecutive sample over it (gpu_over_samples); a sibling lease and a
// process outside any lease, both holding GTT too, live on. The over-bound
// buffer is one allocation, so every sample sees 0 or all of it (never a
// half-made figure); the spacing of the two samples is the near-bound
// cadence's, whatever the VM's clock made of it, so it is read, not asserted.
TEST_F(VmSystem, GpuMemoryMaxKillsTheLeaseAndNothingElse) {
  setCharging(false);
  auto outsider = spawnProgram({kWorkload, "gpu", "gtt", "16", "1", "20000"});
  auto sibling = spawnProgram({kTally, "run", "--json", "--state-dir", stateDir() + "-sibling",
                               "--sample-interval", "250ms", "--gpu-memory-max", "1G", "--",
                               kWorkload, "gpu", "gtt", "16", "2", "6000"});
  auto t = run({"--sample-interval", "250ms", "--gpu-memory-max", "64M"},
               {kWorkload, "gpu", "gtt", "128", "1", "20000"});
  EXPECT_EQ(t.result.exitCode(), 137) << describe(t);
  EXPECT_EQ(t.record["outcome"]["class"], "killed-by-tally") << describe(t);
  const std::string summary = t.record["outcome"]["summary"];
  std::smatch m;
  ASSERT_TRUE(std::regex_match(summary, m,
                               std::regex("killed by tally: GPU memory 128\\.0 MiB over "
                                          "gpu_memory_max 64\\.0 MiB \\(drm-fdinfo, 2 samples "
                                          "at ([0-9]+(ms|s|us)( [0-9]+(ms|us))*)\\)")))
      << describe(t);
  const auto& events = t.record["gpu"]["bound"]["events"];
  ASSERT_EQ(events.size(), 1u) << describe(t);
  EXPECT_EQ(events[0]["kind"], "gpu-memory-kill");
  EXPECT_EQ(events[0]["samples"], 2) << describe(t);
  EXPECT_EQ(events[0]["bytes"], 128 * kMiB) << describe(t);
  std::uint64_t reactionNs =
      events[0]["at_ns"].get<std::uint64_t>() - events[0]["first_over_ns"].get<std::uint64_t>();
  // Standalone: the journal has the kill too, under the lease's id.
  std::string id = t.record["lease"]["id"];
  auto journal =
      runProgram({"journalctl", "--no-pager", "-o", "cat", "-t", "tally", "TALLY_LEASE=" + id});
  EXPECT_NE(journal.out.find("killed by tally: GPU memory 128.0 MiB over gpu_memory_max 64.0 MiB"),
            std::string::npos)
      << journal.out;
  // ...and its start and outcome, as structured fields (journalctl -o json).
  std::map<std::string, json> byEvent;
  auto rows =
      runProgram({"journalctl", "--no-pager", "-o", "json", "-t", "tally", "TALLY_LEASE=" + id});
  std::istringstream lines(rows.out);
  for (std::string l; std::getline(lines, l);) {
    json e = json::parse(l, nullptr, false);
    if (e.is_object() && e.contains("TALLY_EVENT")) byEvent[e["TALLY_EVENT"]] = e;
  }
  ASSERT_TRUE(byEvent.count("lease-started")) << rows.out;
  EXPECT_EQ(byEvent["lease-started"]["TALLY_UNIT"], "tally-" + id + ".scope");
  EXPECT_FALSE(byEvent["lease-started"].contains("TALLY_POOL"));  // standalone: no pool
  ASSERT_TRUE(byEvent.count("lease-outcome")) << rows.out;
  const json& end = byEvent["lease-outcome"];
  EXPECT_EQ(end["TALLY_OUTCOME"], "killed-by-tally");
  EXPECT_EQ(end["PRIORITY"], "4");
  EXPECT_EQ(end["TALLY_GPU_PEAK_BYTES"], std::to_string(128 * kMiB)) << end.dump(2);
  EXPECT_TRUE(end.contains("TALLY_MEMORY_PEAK_BYTES")) << end.dump(2);
  EXPECT_TRUE(byEvent.count("gpu-memory-kill")) << rows.out;
  std::printf("[ reaction ] first sample over -> kill: %llu ms (interval 250 ms, spaced %s)\n",
              static_cast<unsigned long long>(reactionNs / 1000000), m[1].str().c_str());
  auto sib = waitProgram(sibling);
  EXPECT_EQ(sib.exitCode(), 0) << sib.err;
  EXPECT_EQ(json::parse(sib.out)["outcome"]["class"], "exited");
  EXPECT_EQ(::kill(outsider.pid, 0), 0) << "a process outside the lease was signalled";
  ::kill(outsider.pid, SIGKILL);
  waitProgram(outsider);
}

// The active probe through the test driver: "not charged" with its charging
// off (today's amdgpu), "charged" with it on (a kernel that charges GTT).
// The text reports are what docs/coverage.md quotes for this kernel, compared.
TEST_F(VmSystem, DoctorActiveProbeTellsChargedFromNotCharged) {
  setCharging(false);
  auto off = runProgram({kTally, "doctor", "--active", "--json"});
  json a = json::parse(off.out, nullptr, false);
  ASSERT_FALSE(a.is_discarded()) << off.err;
  const auto& p = a["gtt_memcg_coverage"]["active_probe"];
  EXPECT_EQ(p["outcome"], "not-charged") << p.dump(2);
  EXPECT_EQ(p["driver"], "tally_testdrm");
  EXPECT_EQ(p["delta_drm_total_gtt_bytes"], 64 * kMiB);
  EXPECT_LT(p["delta_memory_current_bytes"].get<std::int64_t>(),
            static_cast<std::int64_t>(16 * kMiB))
      << p.dump(2);
  EXPECT_EQ(a["gtt_memcg_coverage"]["coverage"], "host");
  EXPECT_EQ(off.exitCode(), 0);  // GTT uncharged and bounded by tally: healthy, not degraded
  EXPECT_NE(::access(("/sys/fs/cgroup" + p["cgroup"].get<std::string>()).c_str(), F_OK), 0)
      << "the probe cgroup was left behind";

  setCharging(true);
  auto on = runProgram({kTally, "doctor", "--active", "--json"});
  json b = json::parse(on.out, nullptr, false);
  ASSERT_FALSE(b.is_discarded()) << on.err;
  const auto& q = b["gtt_memcg_coverage"]["active_probe"];
  EXPECT_EQ(q["outcome"], "charged") << q.dump(2);
  EXPECT_EQ(q["delta_drm_total_gtt_bytes"], 64 * kMiB);
  EXPECT_GE(q["delta_memory_current_bytes"].get<std::int64_t>(),
            static_cast<std::int64_t>(60 * kMiB))
      << q.dump(2);
  EXPECT_EQ(b["gtt_memcg_coverage"]["coverage"], "host+gtt");
  std::string kernel = b["kernel"]["release"];
  EXPECT_EQ(
      b["verdict"],
      "A lease's MemoryMax covers: host memory + GTT (verified by active probe on " + kernel + ")");
  EXPECT_EQ(on.exitCode(), 0) << b.dump(2);

  auto textOn = runProgram({kTally, "doctor", "--active"});
  setCharging(false);
  auto textOff = runProgram({kTally, "doctor", "--active"});
  // docs/coverage.md quotes both reports for each of the matrix's kernels.
  auto shown = [](const ProgramResult& r) {
    return "$ tally doctor --active\n" + r.out + "[exit status " + std::to_string(r.exitCode()) +
           "]\n";
  };
  std::string produced = shown(textOff) + shown(textOn);
  const std::string release = kernel;
  const char* producer = release.rfind("6.1.", 0) == 0    ? "tests/vm/system_test.cpp#6.1"
                         : release.rfind("6.12.", 0) == 0 ? "tests/vm/system_test.cpp#6.12"
                         : release.rfind("7.", 0) == 0    ? "tests/vm/system_test.cpp#7"
                                                          : nullptr;
  if (producer == nullptr) {
    std::printf(
        "kernel %s is none the docs quote (6.1, 6.12, 7.x): its reports are not compared\n%s",
        release.c_str(), produced.c_str());
    return;
  }
  expectPagesQuote({"docs/coverage.md"}, producer, produced);
}

TEST_F(VmSystem, ChargedBuffersShowInMemoryPeakLikeTomorrowsKernel) {
  setCharging(true);
  auto t = run({"--sample-interval", "100ms"}, {kWorkload, "gpu", "vram", "16", "3", "1500"});
  setCharging(false);
  EXPECT_EQ(t.result.exitCode(), 0) << describe(t);
  EXPECT_EQ(t.record["gpu"]["at_peak"]["vram"], 48 * kMiB) << describe(t);
  EXPECT_GE(t.record["memory"]["peak_bytes"].get<std::uint64_t>(), 48 * kMiB) << describe(t);
}

// The first stop signal gives the scope its grace (SIGTERM, then SIGKILL
// after TimeoutStopSec); the main process obeys at once, a child ignores
// SIGTERM. A second signal while tally waits out that grace ends the child
// at once (it used to wait the full 10 s: the end of the lease was one
// blocking stop). Told by what systemd says, not by a clock: a scope whose
// grace runs out logs "Stopping timed out. Killing." (scope_dispatch_timer)
// and fails with result 'timeout'.
TEST_F(VmSystem, ASecondStopSignalEndsWhatIsLeftAtOnce) {
  std::string pids = "/tmp/tally-leftover.pids";
  ::unlink(pids.c_str());
  std::string script = "(trap '' TERM; exec sleep 120) & echo $$ $! > " + pids + ".tmp && mv " +
                       pids + ".tmp " + pids + "; wait";
  auto s =
      spawnProgram({kTally, "run", "--json", "--state-dir", stateDir(), "--", "sh", "-c", script});
  pid_t mainPid = 0, child = 0;
  ASSERT_TRUE(eventually(
      [&] {
        std::ifstream in(pids);
        in >> mainPid >> child;
        return mainPid && child;
      },
      20s));
  ASSERT_EQ(::kill(s.pid, SIGTERM), 0);
  ASSERT_TRUE(processGone(mainPid)) << "the main process should obey SIGTERM";
  EXPECT_EQ(::kill(child, 0), 0) << "the child ignores SIGTERM and must still run here";
  ASSERT_EQ(::kill(s.pid, SIGTERM), 0);
  auto r = waitProgram(s);
  EXPECT_TRUE(processGone(child));
  auto record = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(record.is_object()) << r.err;
  EXPECT_EQ(record["outcome"]["class"], "stopped") << r.err;
  // The second signal ended it, not the grace: systemd never said the scope's
  // stop timed out (journald has all it was sent once --sync returns).
  std::string unit = record["lease"].value("unit", "");
  ASSERT_FALSE(unit.empty()) << r.out;
  ASSERT_EQ(runProgram({"journalctl", "--sync"}).exitCode(), 0);
  auto said = runProgram({"journalctl", "--no-pager", "-o", "cat", "-u", unit}).out;
  EXPECT_NE(said.find(unit), std::string::npos) << "the scope's own lines, to read:\n" << said;
  EXPECT_EQ(said.find("Stopping timed out"), std::string::npos) << said;
  EXPECT_EQ(said.find("'timeout'"), std::string::npos) << said;
}

// tally gpu on a real DRM node: device discovery through sysfs and the fdinfo
// the kernel's DRM core prints for the test driver.
TEST_F(VmSystem, TallyGpuSeesTheTestDriverAndItsClient) {
  setCharging(false);
  std::string readyFile = "/tmp/tally-gpu-holder.ready";
  ::unlink(readyFile.c_str());
  auto holder = spawnProgram({kWorkload, "gpu", "vram", "8", "2", "60000", readyFile});
  ASSERT_TRUE(eventually([&] { return exists(readyFile); }, 20s));
  auto r = runProgram({kTally, "gpu", "--json"});
  ::kill(holder.pid, SIGKILL);
  waitProgram(holder);
  ASSERT_EQ(r.exitCode(), 0) << r.err;
  auto doc = json::parse(r.out);
  // A platform device with no bound driver: sysfs has no driver link, so the
  // device's driver is absent (the clients' fdinfo names it); the key is the
  // device directory's name.
  bool sawDevice = false;
  for (const auto& d : doc["devices"]) {
    if (d["key"] != "tally_testdrm") continue;
    sawDevice = true;
    EXPECT_TRUE(d["driver"].is_null());
    EXPECT_EQ(d["attributed"]["vram"]["resident_bytes"], 16 * kMiB);
    EXPECT_EQ(d["clients"], 1);
  }
  EXPECT_TRUE(sawDevice) << doc["devices"].dump(2);
  bool sawProcess = false;
  for (const auto& p : doc["processes"]) {
    if (p["pid"] != holder.pid) continue;
    sawProcess = true;
    EXPECT_EQ(p["regions"]["vram"]["resident_bytes"], 16 * kMiB) << p.dump(2);
    EXPECT_EQ(p["clients"][0]["driver"], "tally_testdrm");
  }
  EXPECT_TRUE(sawProcess) << doc["processes"].dump(2);
}

TEST_F(VmSystem, LedgerHoldsEveryOutcome) {
  run({}, {"sh", "-c", "exit 3"});
  run({"--slice", "x--y.slice"}, {"true"});
  auto r = runProgram({kTally, "ledger", "--json", "--state-dir", stateDir()});
  ASSERT_EQ(r.exitCode(), 0) << r.err;
  auto rows = json::parse(r.out);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0]["record"]["outcome"]["class"], "exited");
  EXPECT_EQ(rows[1]["record"]["outcome"]["class"], "containment-refused");
}

}  // namespace
}  // namespace tally
