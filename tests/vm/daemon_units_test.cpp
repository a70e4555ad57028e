// Leases that follow a workload's own life: a unit [leases.NAME] declares,
// leased at each of its runs; an attached unit that restarts; a detached job
// (tally run --pool --detach) outliving its client; a podman container leased
// by its name. The fixture: daemon_fixture.h. VM harness only.
#include <sys/stat.h>

#include <filesystem>
#include <set>

#include "daemon_fixture.h"
#include "util/text.h"

namespace tally {
namespace {

using namespace tally::vmdaemon;

// A unit file as an operator writes one (llama-server, or podman quadlet's
// generated service): each start removes its READY barrier and holds 16 MiB
// of GTT until stopped.
std::string installService(const std::string& service, const std::string& readyPath,
                           int gttMiB = 16) {
  writeFile("/run/systemd/system/" + service,
            "[Service]\nType=exec\nExecStartPre=/bin/rm -f " + readyPath + "\nExecStart=" +
                kWorkload + " gpu gtt " + std::to_string(gttMiB) + " 1 600000 " + readyPath + "\n");
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

// Day one on a busy box, with a real systemd: of the test driver's 256 MiB
// of GTT (its mem_info_gtt_* exported), the model server, a unit, holds 96
// MiB and another process 64, so 96 MiB is free. Attached at 250 MiB the
// server needs 154 MiB more: refused, with the arithmetic. At 180 MiB it
// needs 84 more: granted, although 180 is more than the 96 free (its own 96
// are already out of it).
TEST_F(VmDaemon, AttachingARunningServerNeedsOnlyWhatItsDeclarationAdds) {
  const std::string param = "/sys/module/tally_testdrm/parameters/mem_info_gtt_total";
  struct Restore {
    std::string path;
    ~Restore() { writeFile(path, "0\n"); }
  } restore{param};
  writeFile(param, std::to_string(256 * kMiB) + "\n");
  setCharging(false);
  std::string server = installService("tally-vm-busy-" + std::to_string(::getpid()) + ".service",
                                      dir + "/b.ready", 96);
  ASSERT_EQ(shell("systemctl start " + server), 0);
  ASSERT_TRUE(ready(dir + "/b.ready"));
  std::string otherReady = dir + "/o.ready", otherRelease = dir + "/o.release";
  auto other =
      spawnProgram({kWorkload, "gpu", "gtt", "64", "1", "600000", otherReady, otherRelease});
  ASSERT_TRUE(ready(otherReady)) << readFile(other.errPath);
  startDaemon();
  // The daemon has measured the device: 96 MiB free, nothing promised.
  ASSERT_TRUE(eventually(
      [&] {
        json pools = json::parse(tally({"pools", "--json"}).out, nullptr, false);
        if (!pools.is_array()) return false;
        for (const auto& p : pools)
          if (p.value("pool", "") == "gpu" && p["headroom"]["gpu_bytes"].is_number_unsigned())
            return p["headroom"]["gpu_bytes"].get<std::uint64_t>() == 96 * kMiB;
        return false;
      },
      30s))
      << tally({"pools", "--json"}).out;
  auto over = tally({"attach", "--unit", server, "--pool", "gpu", "--memory-max", "256M",
                     "--gpu-memory-max", "250M"});
  EXPECT_NE(over.exitCode(), 0);
  EXPECT_NE(over.err.find("GPU memory on pool gpu's devices: needs 154.0 MiB more: declares "
                          "250.0 MiB, holds 96.0 MiB, 96.0 MiB free"),
            std::string::npos)
      << over.err;
  auto fits = tally({"attach", "--unit", server, "--pool", "gpu", "--memory-max", "256M",
                     "--gpu-memory-max", "180M"});
  ASSERT_EQ(fits.exitCode(), 0) << fits.err;
  std::string lease = fits.out.substr(0, 12);
  json granted = ledgerRows(lease);
  ASSERT_FALSE(granted.empty());
  EXPECT_EQ(granted[0]["body"]["declared"]["gpu_memory_max"], 180 * kMiB) << granted[0];
  writeFile(otherRelease, "");
  (void)waitProgram(other);
  removeService(server);
}

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

}  // namespace
}  // namespace tally
