// The red team's attacks on a real daemon under systemd (VmRedTeam), and the
// bound on a kernel without the BPF LSM (VmNoBpfLsm): the kernel's charge, the
// daemon's kill and the ledger hold against a lying client, hidden buffers, a
// kill -9, deep cgroup chains and buffers that change hands. The fixture:
// daemon_fixture.h. VM harness only.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <regex>

#include "daemon_fixture.h"
#include "support/raw_client.h"

namespace tally {
namespace {

using namespace tally::vmdaemon;

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
  EXPECT_NE(a.err.find("71 levels deep: the kernel charge finds a lease in the first 64 "
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
