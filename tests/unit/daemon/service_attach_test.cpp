// The lease service's attach: a cgroup, a unit, a process or a container
// leased whole, metered, bounded and ended, and the attaches it refuses.
#include <filesystem>

#include "daemon/service_fixture.h"
#include "views/ledger_view.h"

namespace tally {
namespace {

using namespace tally::testing;
using json = nlohmann::json;
constexpr std::uint64_t GiB = 1ULL << 30;

TEST_F(ServiceTest, AttachToACgroupMetersItAndEndsWhenItEmpties) {
  workloadCgroup("/machine.slice/podman-1.scope", true);
  FakeProcess p;
  p.pid = 4242;
  p.cgroup = "/machine.slice/podman-1.scope";
  FakeFd fd;
  fd.drmMinor = 128;
  fd.fdinfo = amdgpuFdinfo(7, "0000:c6:00.0", 4 * 1024 * 1024, 0);  // 4 GiB GTT
  p.fds = {fd};
  host.addProcess(p);
  host.addCgroup("/machine.slice/podman-1.scope", {4242});
  json r = call(1, 0, "attach",
                {{"pools", {"gpu"}},
                 {"cgroup", "/machine.slice/podman-1.scope"},
                 {"gpu_memory_max", 8 * GiB},
                 {"memory_max", 3 * GiB},
                 {"name", "llama"}});
  ASSERT_TRUE(r["ok"]) << r;
  std::string id = r["result"]["lease"];
  EXPECT_EQ(r["result"]["state"], "running");
  // A plain cgroup (not a unit): memory.max written directly and read back.
  EXPECT_EQ(readFile(host.cgroupRoot() + "/machine.slice/podman-1.scope/memory.max"), "3221225472");
  EXPECT_TRUE(units.memoryMaxCalls.empty());
  EXPECT_EQ(watches.paths[id], host.cgroupRoot() + "/machine.slice/podman-1.scope/cgroup.events");
  EXPECT_EQ(r["result"]["gpu"]["current_bytes"], 4 * GiB);
  EXPECT_EQ(r["result"]["memory"]["current_bytes"], GiB);
  service->sample();
  auto samples = ledgerDb->samples(id);
  ASSERT_EQ(samples->size(), 1u);
  EXPECT_EQ((*samples)[0].memoryCurrent, GiB);
  EXPECT_EQ((*samples)[0].byClass.hostUncharged, 4 * GiB);
  EXPECT_EQ((*samples)[0].gpuBytes, 4 * GiB);
  // A second lease on the same cgroup is a conflict.
  EXPECT_EQ(call(2, 0, "attach",
                 {{"pools", {"gpu"}},
                  {"cgroup", "/machine.slice/podman-1.scope"},
                  {"gpu_memory_max", GiB},
                  {"memory_max", GiB}})["error"]["code"],
            "conflict");
  // The workload ends: another OOM kill happened meanwhile (1 -> 2).
  writeFile(host.cgroupRoot() + "/machine.slice/podman-1.scope/memory.events",
            "oom 2\noom_kill 2\n");
  writeFile(host.cgroupRoot() + "/machine.slice/podman-1.scope/cgroup.events",
            "populated 0\nfrozen 0\n");
  service->cgroupChanged(id);
  EXPECT_EQ(kinds(id), (std::vector<std::string>{"granted", "adopted", "outcome"}));
  json outcome = json::parse(rows(id).back().body);
  EXPECT_EQ(outcome["outcome"]["class"], "oom-killed");
  EXPECT_EQ(outcome["outcome"]["oom_kill"], 1);  // the lease's, not the cgroup's lifetime 2
  EXPECT_EQ(outcome["memory"]["peak_bytes"], 2 * GiB);
  EXPECT_EQ(outcome["gpu"]["peak_bytes"], 4 * GiB);
  EXPECT_EQ(outcome["lease"]["kind"], "attach");
  // No wait status exists for a workload tally did not start: none is invented.
  EXPECT_FALSE(outcome["outcome"].contains("tally_exit_status"));
  auto listed = ledgerDb->recent(5);
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ(listed->back().entry.outcomeClass, "oom-killed");
  EXPECT_FALSE(listed->back().entry.exitStatus);
  EXPECT_EQ(service->liveLeases(), 0u);
  EXPECT_TRUE(watches.paths.empty());
}

// An attacher that reaps the workload itself (the Slurm plugin: slurmstepd
// reaps a step's tasks) promises its wait status: the outcome waits for it
// when the cgroup empties, records it, and ends without it at the deadline.
TEST_F(ServiceTest, AnAttachersExitReportIsWaitedForAndRecorded) {
  auto attachReporting = [&](const std::string& cg, pid_t pid) {
    workloadCgroup(cg, true);
    host.addCgroup(cg, {pid});
    json r =
        call(1, 0, "attach",
             {{"pools", {"gpu"}}, {"cgroup", cg}, {"gpu_memory_max", GiB}, {"reports_exit", true}});
    EXPECT_TRUE(r["ok"]) << r;
    writeFile(host.cgroupRoot() + cg + "/cgroup.events", "populated 0\nfrozen 0\n");
    return r["result"].value("lease", "");
  };
  clockStep = 0;
  std::string id = attachReporting("/system.slice/slurmstepd.scope/job_7/step_0/user", 4300);
  service->cgroupChanged(id);
  EXPECT_EQ(kinds(id), (std::vector<std::string>{"granted", "adopted"})) << "waits for the word";
  json ack = call(2, 0, "exited", {{"lease", id}, {"signal", 9}});
  ASSERT_TRUE(ack["ok"]) << ack;
  ASSERT_EQ(kinds(id).back(), "outcome") << "the word came: it ends now";
  json outcome = json::parse(rows(id).back().body);
  EXPECT_EQ(outcome["outcome"]["signal"], 9);
  EXPECT_EQ(outcome["outcome"]["signal_name"], "SIGKILL");
  EXPECT_NE(outcome["outcome"]["summary"].get<std::string>().find(
                "its tasks were killed by SIGKILL (its attacher's report)"),
            std::string::npos)
      << outcome.dump(2);
  EXPECT_FALSE(outcome["outcome"].contains("tally_exit_status")) << "tally ran nothing";
  // The word never comes: it ends at the deadline, without a made-up status.
  std::string silent = attachReporting("/system.slice/slurmstepd.scope/job_8/step_0/user", 4301);
  service->cgroupChanged(silent);
  service->tick();
  EXPECT_EQ(kinds(silent).size(), 2u);
  clockUs += rpc::api::kExitReportWaitUs;
  service->tick();
  ASSERT_EQ(kinds(silent).back(), "outcome");
  json quiet = json::parse(rows(silent).back().body);
  EXPECT_FALSE(quiet["outcome"].contains("exit_code"));
  EXPECT_FALSE(quiet["outcome"].contains("signal"));
  // Only for a live attach lease, and only its owner or root.
  EXPECT_EQ(call(3, 0, "exited", {{"lease", silent}, {"exit_code", 0}})["error"]["code"],
            "not-found");
}

// systemd removes a stopped unit's cgroup, often before the lease ends (its
// attacher's report is awaited, or systemd is first): the record keeps the
// counters the daemon read while the cgroup existed (when it emptied, or at
// its last memory.events change, which an OOM kill notifies) and says when;
// with none, the sampled peak stands in for memory.peak, marked as such.
TEST_F(ServiceTest, ACgroupRemovedBeforeTheLeaseEndsKeepsTheCountersReadWhileItExisted) {
  auto attach = [&](const std::string& cg, pid_t pid, bool reports) {
    workloadCgroup(cg, true);
    host.addCgroup(cg, {pid});
    json r = call(1, 0, "attach",
                  {{"pools", {"gpu"}},
                   {"cgroup", cg},
                   {"gpu_memory_max", GiB},
                   {"memory_max", 3 * GiB},
                   {"reports_exit", reports}});
    EXPECT_TRUE(r["ok"]) << r;
    return r["result"].value("lease", "");
  };
  auto remove = [&](const std::string& cg) { std::filesystem::remove_all(host.cgroupRoot() + cg); };
  // Read when it emptied; removed while its attacher's word was awaited.
  const std::string a = "/system.slice/slurmstepd.scope/job_9/step_0/user";
  std::string emptied = attach(a, 4400, true);
  EXPECT_EQ(watches.all[emptied].back(), host.cgroupRoot() + a + "/memory.events")
      << "an OOM kill notifies memory.events: the daemon reads the counters then too";
  writeFile(host.cgroupRoot() + a + "/memory.events", "oom 2\noom_kill 2\n");
  writeFile(host.cgroupRoot() + a + "/cgroup.events", "populated 0\nfrozen 0\n");
  service->cgroupChanged(emptied);
  remove(a);
  ASSERT_TRUE(call(2, 0, "exited", {{"lease", emptied}, {"signal", 9}})["ok"]);
  json one = json::parse(rows(emptied).back().body);
  EXPECT_EQ(one["outcome"]["class"], "oom-killed") << one.dump(2);
  EXPECT_EQ(one["outcome"]["oom_kill"], 1);
  EXPECT_EQ(one["memory"]["peak_bytes"], 2 * GiB);
  EXPECT_EQ(one["memory"]["read_before_end"]["when"],
            "read when the cgroup emptied, before it was removed");
  EXPECT_NE(one["outcome"]["summary"].get<std::string>().find(
                "oom_kill +1, MemoryMax=3.0 GiB; read when the cgroup emptied, before it was "
                "removed)"),
            std::string::npos)
      << one["outcome"]["summary"];

  // Read at its last memory.events change (still running then); removed
  // before any cgroup.events word: the sample finds it gone.
  const std::string b = "/system.slice/llama.service";
  std::string changed = attach(b, 4401, false);
  writeFile(host.cgroupRoot() + b + "/memory.events", "oom 1\noom_kill 1\n");
  service->cgroupChanged(changed);  // memory.events changed: no OOM kill since adoption
  EXPECT_EQ(kinds(changed).size(), 2u) << "still running: nothing ends";
  remove(b);
  service->sample();
  ASSERT_EQ(kinds(changed).back(), "outcome");
  json two = json::parse(rows(changed).back().body);
  EXPECT_EQ(two["outcome"]["class"], "ended") << two.dump(2);
  EXPECT_EQ(two["outcome"]["oom_kill"], 0);
  EXPECT_NE(two["outcome"]["summary"].get<std::string>().find(
                "the kernel OOM killer killed none of its processes (memory.events: read when "
                "memory.events last changed, before the cgroup was removed; a later change is "
                "not seen)"),
            std::string::npos)
      << two["outcome"]["summary"];

  // Removed between two of its files as the end read them (memory.events
  // read, memory.peak gone a moment later): the file the end missed comes
  // from the read made when it emptied, and the record says which and when;
  // memory.events was read at the end, so the OOM line carries no caveat.
  const std::string d = "/system.slice/slurmstepd.scope/job_10/step_0/user";
  std::string torn = attach(d, 4403, true);
  writeFile(host.cgroupRoot() + d + "/memory.events", "oom 1\noom_kill 1\n");
  writeFile(host.cgroupRoot() + d + "/cgroup.events", "populated 0\nfrozen 0\n");
  service->cgroupChanged(torn);
  std::filesystem::remove(host.cgroupRoot() + d + "/memory.peak");
  ASSERT_TRUE(call(2, 0, "exited", {{"lease", torn}, {"exit_code", 0}})["ok"]);
  json four = json::parse(rows(torn).back().body);
  EXPECT_EQ(four["memory"]["peak_bytes"], 2 * GiB) << four["memory"].dump(2);
  EXPECT_FALSE(four["memory"].contains("peak_unknown")) << four["memory"].dump(2);
  EXPECT_EQ(four["memory"]["read_before_end"]["when"],
            "memory.peak read when the cgroup emptied, before it was removed");
  EXPECT_EQ(four["outcome"]["oom_kill"], 0);
  EXPECT_EQ(four["outcome"]["summary"].get<std::string>().find("read when"), std::string::npos)
      << four["outcome"]["summary"];

  // Never read before it was gone: memory.peak is unknown with its reason,
  // and the sampled peak is what the ledger shows, marked '~'.
  const std::string c = "/system.slice/gone.service";
  std::string never = attach(c, 4402, false);
  remove(c);
  service->sample();
  ASSERT_EQ(kinds(never).back(), "outcome");
  json three = json::parse(rows(never).back().body);
  EXPECT_FALSE(three["memory"].contains("peak_bytes"));
  EXPECT_TRUE(three["memory"].contains("peak_unknown")) << three["memory"].dump(2);
  EXPECT_EQ(three["memory"]["sampled"]["peak_current_bytes"], GiB);
  // The daemon's outcome row names its owner (the attacher, root here).
  EXPECT_EQ(three["lease"]["owner_uid"], 0);
  auto table = views::ledgerTable(*ledgerDb->recent(1), true,
                                  [](std::uint32_t uid) { return "uid" + std::to_string(uid); });
  ASSERT_EQ(table.size(), 3u);
  EXPECT_NE(table[1].find("~1.0 GiB"), std::string::npos) << table[1];
  EXPECT_NE(table[1].find(" uid0 "), std::string::npos) << table[1];
  EXPECT_EQ(table[2],
            "(~: the peak of the daemon's samples of memory.current; memory.peak was gone with "
            "the cgroup when the lease ended)");
}

TEST_F(ServiceTest, AttachToAUnitSetsMemoryMaxThroughSystemdAndReadsItBack) {
  workloadCgroup("/system.slice/llama.service", true);
  units.cgroups["llama.service"] = "/system.slice/llama.service";
  json r = call(1, 0, "attach",
                {{"pools", {"gpu"}},
                 {"unit", "llama.service"},
                 {"gpu_memory_max", 48 * GiB},
                 {"memory_max", 8 * GiB}});
  ASSERT_TRUE(r["ok"]) << r;
  ASSERT_EQ(units.memoryMaxCalls.size(), 1u);
  EXPECT_EQ(units.memoryMaxCalls[0], std::make_pair(std::string("llama.service"), 8 * GiB));
  EXPECT_EQ(r["result"]["unit"], "llama.service");
  std::string id = r["result"]["lease"];
  json adopted = json::parse(rows(id)[1].body);
  EXPECT_EQ(adopted["applied"]["memory_max"], 8 * GiB);
  // Released: the workload goes on; the outcome says so.
  EXPECT_EQ(call(1, 0, "release", {{"lease", id}})["result"]["state"], "released");
  json outcome = json::parse(rows(id).back().body);
  EXPECT_EQ(outcome["outcome"]["class"], "released");
  EXPECT_EQ(outcome["outcome"]["oom_kill"], 0);
}

TEST_F(ServiceTest, AttachFailsClosedWhenTheLimitDoesNotReadBack) {
  workloadCgroup("/system.slice/stubborn.service", true);
  units.cgroups["stubborn.service"] = "/system.slice/stubborn.service";
  units.obey = false;  // systemd "accepts" but memory.max still reads max
  json r = call(1, 0, "attach",
                {{"pools", {"one"}}, {"unit", "stubborn.service"}, {"memory_max", 8 * GiB}});
  EXPECT_EQ(r["error"]["code"], "refused");
  EXPECT_NE(r["error"]["message"].get<std::string>().find("memory.max is max, declared 8589934592"),
            std::string::npos)
      << r;
  EXPECT_EQ(service->liveLeases(), 0u);
}

TEST_F(ServiceTest, AttachRefusals) {
  workloadCgroup("/empty.scope", false);
  EXPECT_EQ(call(1, 0, "attach", {{"pools", {"one"}}, {"cgroup", "/empty.scope"}})["error"]["code"],
            "refused");
  EXPECT_EQ(call(1, 0, "attach", {{"pools", {"one"}}, {"cgroup", "/nope"}})["error"]["code"],
            "not-found");
  EXPECT_EQ(call(1, 0, "attach", {{"pools", {"one"}}, {"cgroup", "/"}})["error"]["code"],
            "refused");
  EXPECT_EQ(
      call(1, 0, "attach", {{"pools", {"one"}}, {"unit", "missing.service"}})["error"]["code"],
      "refused");
  // Someone else's cgroup: not for a non-root caller; their own is fine.
  workloadCgroup("/user.slice/theirs.scope", true, 2000);
  workloadCgroup("/user.slice/mine.scope", true, 1000);
  EXPECT_EQ(call(1, 1000, "attach",
                 {{"pools", {"one"}}, {"cgroup", "/user.slice/theirs.scope"}})["error"]["code"],
            "forbidden");
  EXPECT_EQ(call(1, 1000, "attach",
                 {{"pools", {"one"}},
                  {"cgroup", "/user.slice/mine.scope"},
                  {"memory_max", GiB}})["error"]["code"],
            "forbidden");  // MemoryMax on a unit: root only
  EXPECT_TRUE(
      call(1, 1000, "attach", {{"pools", {"one"}}, {"cgroup", "/user.slice/mine.scope"}})["ok"]);
}

// One workload, one lease: a podman container is its libpod-<id>.scope and
// the nested .../container cgroup its processes run in. Either may be leased,
// never both: the second is refused with both leases named, whichever order.
TEST_F(ServiceTest, ACgroupInsideOrAboveAnotherLeasesIsRefused) {
  const std::string scope = "/machine.slice/libpod-4f2a9c1e8b7d.scope";
  workloadCgroup(scope, true);
  workloadCgroup(scope + "/container", true);
  json outer =
      call(1, 0, "attach",
           {{"pools", {"gpu"}}, {"gpu_memory_max", GiB}, {"cgroup", scope}, {"name", "qwen"}});
  ASSERT_TRUE(outer["ok"]) << outer;
  std::string id = outer["result"]["lease"];
  json inner =
      call(2, 0, "attach",
           {{"pools", {"gpu"}}, {"gpu_memory_max", GiB}, {"cgroup", scope + "/container"}});
  ASSERT_FALSE(inner["ok"]) << inner;
  EXPECT_EQ(inner["error"]["code"], "conflict");
  EXPECT_EQ(inner["error"]["message"],
            fmt::format("cgroup {}/container is inside {}, which lease {} (qwen) already holds: "
                        "one workload, one lease (its memory would be counted twice). Release {} "
                        "first, or attach the workload it holds",
                        scope, scope, id, id));
  EXPECT_TRUE(call(3, 0, "release", {{"lease", id}})["ok"]);
  json nested =
      call(4, 0, "attach",
           {{"pools", {"gpu"}}, {"gpu_memory_max", GiB}, {"cgroup", scope + "/container"}});
  ASSERT_TRUE(nested["ok"]) << nested;
  json above =
      call(5, 0, "attach", {{"pools", {"gpu"}}, {"gpu_memory_max", GiB}, {"cgroup", scope}});
  ASSERT_FALSE(above["ok"]);
  EXPECT_NE(above["error"]["message"].get<std::string>().find(" is above " + scope + "/container"),
            std::string::npos)
      << above;
}

TEST_F(ServiceTest, AttachByPidFollowsItsCgroup) {
  workloadCgroup("/system.slice/ollama.service", true);
  FakeProcess p;
  p.pid = 777;
  p.cgroup = "/system.slice/ollama.service";
  host.addProcess(p);
  json r = call(1, 0, "attach", {{"pools", {"one"}}, {"pid", 777}});
  ASSERT_TRUE(r["ok"]) << r;
  EXPECT_EQ(r["result"]["cgroup"], "/system.slice/ollama.service");
  EXPECT_EQ(r["result"]["target"]["pid"], 777);
  EXPECT_EQ(watches.pids[r["result"]["lease"]], 777);  // its exit is watched through a pidfd too
  json gone = call(1, 0, "attach", {{"pools", {"one"}}, {"pid", 778}});
  EXPECT_EQ(gone["error"]["code"], "not-found");
  EXPECT_EQ(gone["error"]["message"], "no such process: pid 778 (has it exited? check with ps)");
}

}  // namespace
}  // namespace tally

namespace tally::testing {
namespace {

// tally attach --container: the client sends the engine's answer (its init
// pid, id and name); the daemon leases the container's whole cgroup after
// checking the kernel puts that pid in it, and records the name.
TEST_F(ServiceTest, AContainerIsLeasedWholeByItsInitPidAndNamed) {
  const std::string id = "3f2a9c0d1b2e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a";
  const std::string scope = "/machine.slice/libpod-" + id + ".scope";
  workloadCgroup(scope, true);
  workloadCgroup(scope + "/container", true);
  FakeProcess init;
  init.pid = 5010;
  init.cgroup = scope + "/container";
  host.addProcess(init);
  json container = {{"engine", "podman"}, {"id", id}, {"name", "comfyui"}};
  json r = call(1, 0, "attach",
                {{"pools", {"gpu"}},
                 {"gpu_memory_max", GiB},
                 {"pid", 5010},
                 {"container", container},
                 {"name", "comfyui"}});
  ASSERT_TRUE(r["ok"]) << r;
  std::string lease = r["result"]["lease"];
  EXPECT_EQ(r["result"]["cgroup"], scope);  // the whole container, not its nested part
  json granted = json::parse(rows(lease)[0].body);
  EXPECT_EQ(granted["target"]["container"], container) << granted.dump(2);
  EXPECT_EQ(granted["target"]["pid"], 5010);
  // The same container by its scope: one workload, one lease.
  json twice =
      call(2, 0, "attach", {{"pools", {"gpu"}}, {"gpu_memory_max", GiB}, {"cgroup", scope}});
  EXPECT_EQ(twice["error"]["code"], "conflict") << twice;
  EXPECT_NE(twice["error"]["message"].get<std::string>().find(lease + " (comfyui)"),
            std::string::npos)
      << twice;
  // A pid that is not in the container the engine named (it restarted, or
  // the answer is stale) is refused, naming both.
  FakeProcess other;
  other.pid = 5020;
  other.cgroup = "/system.slice/llama.service";
  host.addProcess(other);
  workloadCgroup("/system.slice/llama.service", true);
  json wrong =
      call(3, 0, "attach",
           {{"pools", {"gpu"}}, {"gpu_memory_max", GiB}, {"pid", 5020}, {"container", container}});
  EXPECT_EQ(wrong["error"]["code"], "refused") << wrong;
  EXPECT_EQ(wrong["error"]["message"],
            "process 5020 is in cgroup /system.slice/llama.service, which is not podman container "
            "comfyui (3f2a9c0d1b2e); did it restart? Run tally attach --container comfyui again");
  // A container without its pid is a malformed request.
  EXPECT_EQ(
      call(4, 0, "attach",
           {{"pools", {"gpu"}}, {"cgroup", scope}, {"container", container}})["error"]["code"],
      "invalid-params");
}

}  // namespace
}  // namespace tally::testing

namespace tally {
namespace {

// Day one on a busy box: the model server already runs, holding 36 GiB of
// the 53 GiB of GTT in use (96 in all). Its own use is already out of the
// measured free, so attaching it needs only what its declaration adds: at
// 84 GiB that is 48 more than the 43.25 free (refused, with the
// arithmetic); at 75 it is 39 more, granted. The budget counts all 75.
TEST_F(ServiceBoundTest, AnAttachIsAdmittedOnWhatItAddsToWhatItHolds) {
  const std::string dev = host.sysRoot() + "/devices/pci0000:00/0000:c6:00.0";
  writeFile(dev + "/mem_info_gtt_total", fmt::format("{}\n", 96 * GiB));
  writeFile(dev + "/mem_info_gtt_used", fmt::format("{}\n", 53 * GiB));
  reopen();
  const std::string server = "/system.slice/llama-server.service";
  gpuWorkload(server, 5010, 21, 36);
  json params = {{"pools", {"gpu"}},
                 {"cgroup", server},
                 {"gpu_memory_max", 84 * GiB},
                 {"name", "llama"},
                 {"no_wait", true}};
  json over = call(1, 0, "attach", params);
  ASSERT_FALSE(over["ok"]) << over;
  EXPECT_NE(over["error"]["message"].get<std::string>().find(
                "GPU memory on pool gpu's devices: needs 48.0 GiB more: declares 84.0 GiB, holds "
                "36.0 GiB, 43.2 GiB free"),
            std::string::npos)
      << over;
  params["gpu_memory_max"] = 75 * GiB;
  json fits = call(1, 0, "attach", params);
  ASSERT_TRUE(fits["ok"]) << fits;
  json pools = call(2, 0, "pools", json::object());
  EXPECT_EQ(pools["result"]["pools"][0]["gpu_memory_declared"], 75 * GiB) << pools;
}

// Host memory held is what MemAvailable cannot count as free: anon and
// shmem (memory.stat), not memory.current, whose page cache MemAvailable
// already counts. With 3 GiB available, a server whose cgroup shows 1 GiB
// current but 256 MiB anon needs 3.25 GiB more for a 3.5 GiB MemoryMax, not
// 2.5: refused, with the arithmetic.
TEST_F(ServiceBoundTest, AnAttachsHostMemoryHeldIsItsAnonNotItsPageCache) {
  cfg.pools = {config::Pool{"mem", 2, 8 * GiB, std::nullopt, {}}};
  host.setMemAvailable(3 * GiB);
  reopen();
  const std::string server = "/system.slice/llama-server.service";
  workloadCgroup(server, true);  // memory.current 1 GiB
  writeFile(host.cgroupRoot() + server + "/memory.stat",
            "anon 268435456\nfile 805306368\nshmem 0\n");
  FakeProcess p;
  p.pid = 5010;
  p.cgroup = server;
  host.addProcess(p);
  json r = call(1, 0, "attach",
                {{"pools", {"mem"}},
                 {"cgroup", server},
                 {"memory_max", 3 * GiB + GiB / 2},
                 {"no_wait", true}});
  ASSERT_FALSE(r["ok"]) << r;
  EXPECT_NE(r["error"]["message"].get<std::string>().find(
                "host memory: needs 3.2 GiB more: declares 3.5 GiB, holds 256.0 MiB, 3.0 GiB free"),
            std::string::npos)
      << r;
}

}  // namespace
}  // namespace tally
