// The daemon's lease service on a synthetic host: fake /proc, /sys and cgroup
// trees, an in-memory outbox, watches and systemd; a real ledger in a temp
// dir. Every reply, event and ledger row is asserted.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>

#include "daemon/dispatch.h"
#include "daemon/service.h"
#include "support/fake_host.h"
#include "util/clock.h"

namespace tally {
namespace {

using namespace tally::testing;
using json = nlohmann::json;
constexpr std::uint64_t GiB = 1ULL << 30;

struct FakeOutbox : daemon::Outbox {
  std::map<std::uint64_t, std::vector<json>> sent;
  bool send(std::uint64_t conn, std::string line) override {
    sent[conn].push_back(json::parse(line));
    return true;
  }
  json last(std::uint64_t conn) { return sent[conn].empty() ? json() : sent[conn].back(); }
};

struct FakeWatches : daemon::Watches {
  std::map<std::string, std::string> paths;
  Status watch(const std::string& id, const std::string& path) override {
    paths[id] = path;
    return Ok{};
  }
  std::map<std::string, pid_t> pids;
  bool watchPid(const std::string& id, pid_t pid) override {
    pids[id] = pid;
    return true;
  }
  void unwatch(const std::string& id) override {
    paths.erase(id);
    pids.erase(id);
  }
};

struct FakeUnits : daemon::Units {
  std::map<std::string, std::string> cgroups;
  std::vector<std::pair<std::string, std::uint64_t>> memoryMaxCalls;
  std::string cgroupRoot;  // systemd writes memory.max there, like the real one
  bool obey = true;
  Result<std::string> controlGroup(const std::string& unit) override {
    auto it = cgroups.find(unit);
    if (it == cgroups.end()) return Error{0, "Unit " + unit + " not loaded."};
    return it->second;
  }
  Status setMemoryMax(const std::string& unit, std::uint64_t bytes) override {
    memoryMaxCalls.emplace_back(unit, bytes);
    if (obey) writeFile(cgroupRoot + cgroups[unit] + "/memory.max", std::to_string(bytes) + "\n");
    return Ok{};
  }
  std::vector<std::pair<std::string, int>> kills;
  Status killUnit(const std::string& unit, int signal) override {
    kills.emplace_back(unit, signal);
    return Ok{};
  }
  std::vector<std::string> stops;
  Status stopUnit(const std::string& unit) override {
    stops.push_back(unit);
    return Ok{};
  }
};

struct FakeJournal : journal::Journal {
  struct Note {
    int priority;
    std::string message;
    std::vector<std::pair<std::string, std::string>> fields;
  };
  std::vector<Note> notes;
  void note(int priority, const std::string& message, const std::vector<std::pair<std::string, std::string>>& fields) override {
    notes.push_back({priority, message, fields});
  }
};

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    host.setMemAvailable(100 * GiB);
    FakeDevice apu;
    apu.memInfo = {{"gtt_total", 120 * GiB}, {"gtt_used", 20 * GiB}, {"vram_total", 512ULL << 20}, {"vram_used", 256ULL << 20}};
    host.addDevice(apu);
    makeDirs(host.cgroupRoot());
    units.cgroupRoot = host.cgroupRoot();
    cfg.daemon.clientGraceUs = 0;
    cfg.pools = {config::Pool{"gpu", 4, std::nullopt, 96 * GiB, {}}, config::Pool{"one", 1, std::nullopt, std::nullopt, {}}};
    reopen();
  }
  void reopen() {
    service.reset();
    ledgerDb.reset();
    ledgerDb.emplace(std::move(*ledger::Ledger::open(state.path())));
    proc.emplace(std::move(*fs::Root::open(host.procRoot())));
    sys.emplace(std::move(*fs::Root::open(host.sysRoot())));
    cgroup.emplace(std::move(*fs::Root::open(host.cgroupRoot())));
    daemon::ServiceEnv env{*proc, *sys, &*cgroup, outbox, watches, &units, 4096, &journal};
    service = std::make_unique<daemon::Service>(cfg, *ledgerDb, env);
  }
  json call(std::uint64_t conn, std::uint32_t uid, const std::string& method, json params) {
    rpc::Request r{json(next), method, std::move(params)};
    ++next;
    service->handle(conn, daemon::Peer{1000, uid, uid}, r);
    return outbox.last(conn);
  }
  // A workload's cgroup as the kernel shows it.
  void workloadCgroup(const std::string& path, bool populated, std::uint32_t owner = 0) {
    std::string dir = host.cgroupRoot() + path;
    writeFile(dir + "/cgroup.events", fmt::format("populated {}\nfrozen 0\n", populated ? 1 : 0));
    writeFile(dir + "/memory.current", "1073741824\n");
    writeFile(dir + "/memory.peak", "2147483648\n");
    writeFile(dir + "/memory.events", "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\noom_group_kill 0\n");
    writeFile(dir + "/memory.max", "max\n");
    writeFile(dir + "/memory.high", "max\n");
    writeFile(dir + "/memory.stat", "anon 1000\nfile 2000\npgfault 77\n");
    if (owner) {
      ASSERT_EQ(::chown(dir.c_str(), owner, owner), 0);
    }
  }
  std::vector<ledger::Event> rows(const std::string& lease) { return *ledgerDb->events(lease); }
  std::vector<std::string> kinds(const std::string& lease) {
    std::vector<std::string> k;
    for (const auto& e : rows(lease)) k.push_back(e.kind);
    return k;
  }

  FakeHost host;
  TempDir state;
  config::Config cfg;
  FakeOutbox outbox;
  FakeWatches watches;
  FakeUnits units;
  FakeJournal journal;
  std::optional<ledger::Ledger> ledgerDb;
  std::optional<fs::Root> proc, sys, cgroup;
  std::unique_ptr<daemon::Service> service;
  int next = 1;
};

TEST_F(ServiceTest, CapacityOneSerialisesAndTheQueueSeesItsPosition) {
  json a = call(1, 1000, "acquire", {{"pools", {"one"}}, {"name", "first"}});
  ASSERT_TRUE(a["ok"]) << a;
  std::string first = a["result"]["lease"];
  EXPECT_EQ(a["result"]["state"], "granted");
  call(2, 1000, "acquire", {{"pools", {"one"}}, {"name", "second"}});
  json queued = outbox.last(2);
  EXPECT_EQ(queued["event"], "queued");
  EXPECT_EQ(queued["position"], 1);
  EXPECT_EQ(queued["waiting_for"], "capacity");
  std::string second = queued["lease"];
  EXPECT_EQ(service->queuedRequests(), 1u);
  // The owner releases the granted lease before it started: withdrawn, and the next is granted.
  json r = call(1, 1000, "release", {{"lease", first}});
  EXPECT_EQ(r["result"]["state"], "withdrawn");
  json granted = outbox.last(2);
  EXPECT_TRUE(granted["ok"]);
  EXPECT_EQ(granted["result"]["lease"], second);
  EXPECT_EQ(kinds(first), (std::vector<std::string>{"granted", "released", "withdrawn"}));
  EXPECT_EQ(kinds(second), (std::vector<std::string>{"granted"}));
  EXPECT_TRUE(ledgerDb->verify()->problems.empty());
}

TEST_F(ServiceTest, BudgetedPoolRefusesAnUndeclaredRequest) {
  json r = call(1, 1000, "acquire", {{"pools", {"gpu"}}});
  EXPECT_FALSE(r["ok"]);
  EXPECT_EQ(r["error"]["code"], "refused");
  EXPECT_NE(r["error"]["message"].get<std::string>().find("--gpu-memory-max"), std::string::npos);
  r = call(1, 1000, "acquire", {{"pools", {"gpu"}}, {"gpu_memory_max", 97 * GiB}});
  EXPECT_EQ(r["error"]["code"], "refused");
  // Two leases of 48 GiB fill the 96 GiB budget; a third waits on the budget, not capacity.
  EXPECT_TRUE(call(1, 1000, "acquire", {{"pools", {"gpu"}}, {"gpu_memory_max", 48 * GiB}})["ok"]);
  EXPECT_TRUE(call(2, 1000, "acquire", {{"pools", {"gpu"}}, {"gpu_memory_max", 40 * GiB}})["ok"]);
  call(3, 1000, "acquire", {{"pools", {"gpu"}}, {"gpu_memory_max", 16 * GiB}});
  EXPECT_EQ(outbox.last(3)["waiting_for"], "gpu-memory-budget");
  json pools = call(4, 1000, "pools", json::object());
  const json& gpu = pools["result"]["pools"][0];
  EXPECT_EQ(gpu["gpu_memory_declared"], 88 * GiB);
  EXPECT_EQ(gpu["gpu_memory_budget"], 96 * GiB);
  EXPECT_EQ(gpu["holders"].size(), 2u);
  EXPECT_EQ(gpu["queue"].size(), 1u);
  // Headroom: MemAvailable 100 GiB, device free (120-20) + (0.5-0.25) GiB, minus the
  // holders' declarations (nothing measured yet: all of 48 + 40 GiB is promised).
  EXPECT_EQ(gpu["headroom"]["gpu_bytes"], 100 * GiB - 88 * GiB);
  EXPECT_EQ(gpu["headroom"]["host_bytes"], 100 * GiB);
}

TEST_F(ServiceTest, OnlyTheOwnerOrRootMayRelease) {
  std::string id = call(1, 1000, "acquire", {{"pools", {"one"}}})["result"]["lease"];
  json r = call(2, 1001, "release", {{"lease", id}});
  EXPECT_EQ(r["error"]["code"], "forbidden");
  EXPECT_NE(r["error"]["message"].get<std::string>().find("uid 1000"), std::string::npos);
  EXPECT_EQ(call(2, 1001, "resume", {{"lease", id}})["error"]["code"], "forbidden");
  json record = {{"lease", {{"id", id}}}, {"outcome", {{"class", "exited"}}}};
  EXPECT_EQ(call(2, 1001, "complete", {{"lease", id}, {"record", record}})["error"]["code"], "forbidden");
  EXPECT_TRUE(call(3, 0, "release", {{"lease", id}})["ok"]);
  EXPECT_EQ(call(3, 0, "release", {{"lease", id}})["error"]["code"], "not-found");
}

TEST_F(ServiceTest, MalformedRequestsGetErrorsNotCrashes) {
  EXPECT_EQ(call(1, 0, "frobnicate", json::object())["error"]["code"], "unknown-method");
  EXPECT_EQ(call(1, 0, "acquire", {{"pools", "one"}})["error"]["code"], "invalid-params");
  EXPECT_EQ(call(1, 0, "acquire", {{"pools", {"one"}}, {"memory_max", -1}})["error"]["code"], "invalid-params");
  EXPECT_EQ(call(1, 0, "acquire", {{"pools", {"one"}}, {"priority", 1000}})["error"]["code"], "invalid-params");
  EXPECT_EQ(call(1, 0, "acquire", {{"pools", {"one"}}, {"name", "a b"}})["error"]["code"], "invalid-params");
  EXPECT_EQ(call(1, 0, "lease", json::object())["error"]["code"], "invalid-params");
  EXPECT_EQ(call(1, 0, "attach", {{"pools", {"one"}}})["error"]["code"], "invalid-params");
  EXPECT_EQ(call(1, 0, "attach", {{"pools", {"one"}}, {"cgroup", "/../etc"}})["error"]["code"], "invalid-params");
  EXPECT_EQ(call(1, 0, "attach", {{"pools", {"one"}}, {"pid", 0}})["error"]["code"], "invalid-params");
  EXPECT_EQ(call(1, 0, "attach", {{"pools", {"one"}}, {"unit", "x.mount"}})["error"]["code"], "invalid-params");
  EXPECT_EQ(service->liveLeases(), 0u);
}

TEST_F(ServiceTest, DisconnectingWhileQueuedCancelsTheRequest) {
  call(1, 0, "acquire", {{"pools", {"one"}}});
  call(2, 0, "acquire", {{"pools", {"one"}}});
  EXPECT_EQ(service->queuedRequests(), 1u);
  service->disconnected(2);
  EXPECT_EQ(service->queuedRequests(), 0u);
  EXPECT_EQ(call(3, 0, "leases", json::object())["result"]["leases"].size(), 1u);
}

TEST_F(ServiceTest, QueueTimeoutRepliesTimeout) {
  call(1, 0, "acquire", {{"pools", {"one"}}});
  call(2, 0, "acquire", {{"pools", {"one"}}, {"timeout_us", 1}});
  ::usleep(2000);
  service->tick();
  EXPECT_EQ(outbox.last(2)["error"]["code"], "timeout");
  EXPECT_EQ(service->queuedRequests(), 0u);
}

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
  json r = call(1, 0, "attach", {{"pools", {"gpu"}}, {"cgroup", "/machine.slice/podman-1.scope"}, {"gpu_memory_max", 8 * GiB},
                                 {"memory_max", 3 * GiB}, {"name", "llama"}});
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
  EXPECT_EQ((*samples)[0].gttBytes, 4 * GiB);
  EXPECT_EQ((*samples)[0].gpuBytes, 4 * GiB);
  // A second lease on the same cgroup is a conflict.
  EXPECT_EQ(call(2, 0, "attach", {{"pools", {"gpu"}}, {"cgroup", "/machine.slice/podman-1.scope"}, {"gpu_memory_max", GiB},
                                  {"memory_max", GiB}})["error"]["code"],
            "conflict");
  // The workload ends: another OOM kill happened meanwhile (1 -> 2).
  writeFile(host.cgroupRoot() + "/machine.slice/podman-1.scope/memory.events", "oom 2\noom_kill 2\n");
  writeFile(host.cgroupRoot() + "/machine.slice/podman-1.scope/cgroup.events", "populated 0\nfrozen 0\n");
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

TEST_F(ServiceTest, AttachToAUnitSetsMemoryMaxThroughSystemdAndReadsItBack) {
  workloadCgroup("/system.slice/llama.service", true);
  units.cgroups["llama.service"] = "/system.slice/llama.service";
  json r = call(1, 0, "attach", {{"pools", {"gpu"}}, {"unit", "llama.service"}, {"gpu_memory_max", 48 * GiB}, {"memory_max", 8 * GiB}});
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
  json r = call(1, 0, "attach", {{"pools", {"one"}}, {"unit", "stubborn.service"}, {"memory_max", 8 * GiB}});
  EXPECT_EQ(r["error"]["code"], "refused");
  EXPECT_NE(r["error"]["message"].get<std::string>().find("memory.max is max, declared 8589934592"), std::string::npos) << r;
  EXPECT_EQ(service->liveLeases(), 0u);
}

TEST_F(ServiceTest, AttachRefusals) {
  workloadCgroup("/empty.scope", false);
  EXPECT_EQ(call(1, 0, "attach", {{"pools", {"one"}}, {"cgroup", "/empty.scope"}})["error"]["code"], "refused");
  EXPECT_EQ(call(1, 0, "attach", {{"pools", {"one"}}, {"cgroup", "/nope"}})["error"]["code"], "not-found");
  EXPECT_EQ(call(1, 0, "attach", {{"pools", {"one"}}, {"cgroup", "/"}})["error"]["code"], "refused");
  EXPECT_EQ(call(1, 0, "attach", {{"pools", {"one"}}, {"unit", "missing.service"}})["error"]["code"], "refused");
  // Someone else's cgroup: not for a non-root caller; their own is fine.
  workloadCgroup("/user.slice/theirs.scope", true, 2000);
  workloadCgroup("/user.slice/mine.scope", true, 1000);
  EXPECT_EQ(call(1, 1000, "attach", {{"pools", {"one"}}, {"cgroup", "/user.slice/theirs.scope"}})["error"]["code"], "forbidden");
  EXPECT_EQ(call(1, 1000, "attach", {{"pools", {"one"}}, {"cgroup", "/user.slice/mine.scope"}, {"memory_max", GiB}})["error"]["code"],
            "forbidden");  // MemoryMax on a unit: root only
  EXPECT_TRUE(call(1, 1000, "attach", {{"pools", {"one"}}, {"cgroup", "/user.slice/mine.scope"}})["ok"]);
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
  EXPECT_EQ(call(1, 0, "attach", {{"pools", {"one"}}, {"pid", 778}})["error"]["code"], "not-found");
}

TEST_F(ServiceTest, RunLeaseStartedAndCompletedExactlyOnce) {
  std::string id = call(1, 1000, "acquire", {{"pools", {"one"}}, {"name", "job"}})["result"]["lease"];
  std::string slice = "/tally.slice/tally-" + id + ".slice";
  std::string scope = slice + "/tally-" + id + ".scope";
  workloadCgroup(slice, true, 1000);
  workloadCgroup(scope, true, 1000);
  // Not the lease's cgroup, or not the caller's: refused.
  workloadCgroup("/other.scope", true, 1000);
  EXPECT_EQ(call(1, 1000, "started", {{"lease", id}, {"cgroup", "/other.scope"}})["error"]["code"], "forbidden");
  json s = call(1, 1000, "started", {{"lease", id}, {"unit", "tally-" + id + ".scope"}, {"cgroup", scope}, {"counters_cgroup", slice}});
  ASSERT_TRUE(s["ok"]) << s;
  EXPECT_EQ(watches.paths[id], host.cgroupRoot() + slice + "/cgroup.events");
  json record = {{"schema", 1}, {"lease", {{"id", id}, {"name", "job"}}}, {"outcome", {{"class", "exited"}, {"tally_exit_status", 0}}}};
  EXPECT_EQ(call(1, 1000, "complete", {{"lease", id}, {"record", {{"lease", {{"id", "someone-else"}}}}}})["error"]["code"], "invalid-params");
  json c = call(1, 1000, "complete", {{"lease", id}, {"record", record}});
  ASSERT_TRUE(c["ok"]) << c;
  EXPECT_EQ(call(1, 1000, "complete", {{"lease", id}, {"record", record}})["error"]["code"], "not-found");
  EXPECT_EQ(kinds(id), (std::vector<std::string>{"granted", "started", "outcome"}));
  json stored = json::parse(rows(id).back().body);
  EXPECT_EQ(stored["daemon"]["memory_peak_bytes"], 2 * GiB);  // read by the daemon from the slice itself
  EXPECT_EQ(stored["daemon"]["oom_kill"], 1);
}

TEST_F(ServiceTest, RunLeaseWhoseClientNeverReturnsIsLost) {
  std::string id = call(1, 0, "acquire", {{"pools", {"one"}}})["result"]["lease"];
  std::string scope = "/tally-" + id;
  workloadCgroup(scope, true);
  ASSERT_TRUE(call(1, 0, "started", {{"lease", id}, {"cgroup", scope}})["ok"]);
  service->sample();
  service->disconnected(1);
  service->tick();  // still populated: it may resume later
  EXPECT_EQ(service->liveLeases(), 1u);
  writeFile(host.cgroupRoot() + scope + "/cgroup.events", "populated 0\n");
  service->cgroupChanged(id);
  service->tick();
  EXPECT_EQ(kinds(id), (std::vector<std::string>{"granted", "started", "lost"}));
  json lost = json::parse(rows(id).back().body);
  EXPECT_EQ(lost["outcome"]["class"], "lost");
  EXPECT_FALSE(lost["outcome"].contains("tally_exit_status"));  // nobody saw it end
  EXPECT_EQ(lost["memory"]["peak_bytes"], 2 * GiB);
  EXPECT_EQ(lost["ledger_samples"]["count"], 1);
  EXPECT_EQ(lost["ledger_samples"]["memory_current_peak_bytes"], GiB);
}

TEST_F(ServiceTest, RecoveryReadoptsLiveLeasesAndClosesVanishedOnesOnce) {
  workloadCgroup("/system.slice/a.service", true);
  workloadCgroup("/system.slice/b.service", true);
  std::string a = call(1, 0, "attach", {{"pools", {"gpu"}}, {"cgroup", "/system.slice/a.service"}, {"gpu_memory_max", GiB}})["result"]["lease"];
  std::string b = call(1, 0, "attach", {{"pools", {"gpu"}}, {"cgroup", "/system.slice/b.service"}, {"gpu_memory_max", GiB}})["result"]["lease"];
  std::string run = call(2, 0, "acquire", {{"pools", {"one"}}})["result"]["lease"];
  // The daemon dies (kill -9: no goodbye). Meanwhile b's workload goes away.
  service.reset();
  ASSERT_EQ(::system(("rm -rf " + host.cgroupRoot() + "/system.slice/b.service").c_str()), 0);
  reopen();
  auto log = service->recover();
  ASSERT_TRUE(log);
  ASSERT_EQ(log->size(), 3u);
  EXPECT_EQ(service->liveLeases(), 2u);  // a re-adopted, the run lease held for its client
  EXPECT_EQ(kinds(a), (std::vector<std::string>{"granted", "adopted", "readopted"}));
  EXPECT_EQ(kinds(b), (std::vector<std::string>{"granted", "adopted", "lost"}));
  json lostB = json::parse(rows(b).back().body);
  EXPECT_NE(lostB["outcome"]["summary"].get<std::string>().find("is gone"), std::string::npos);
  EXPECT_EQ(lostB["memory"]["sampled"]["peak_unknown"], "not sampled since the daemon restarted; see ledger_samples");
  EXPECT_FALSE(lostB["memory"].contains("peak_bytes"));  // the cgroup is gone: absent, not 0
  // A restart again does not record b twice, nor re-adopt a twice over.
  service.reset();
  reopen();
  ASSERT_TRUE(service->recover());
  EXPECT_EQ(kinds(b).size(), 3u);
  EXPECT_EQ(kinds(a).back(), "readopted");
  // A cgroup re-created under the same name is not the same workload.
  // (Renamed away first, so the new directory cannot reuse the old inode.)
  service.reset();
  std::string aDir = host.cgroupRoot() + "/system.slice/a.service";
  ASSERT_EQ(::rename(aDir.c_str(), (aDir + ".old").c_str()), 0);
  workloadCgroup("/system.slice/a.service", true);
  ASSERT_EQ(::system(("rm -rf " + aDir + ".old").c_str()), 0);
  reopen();
  ASSERT_TRUE(service->recover());
  EXPECT_EQ(kinds(a).back(), "lost");
  EXPECT_NE(json::parse(rows(a).back().body)["outcome"]["summary"].get<std::string>().find("re-created"), std::string::npos);
  // The run lease: its client resumes after the restart.
  EXPECT_TRUE(call(3, 0, "resume", {{"lease", run}})["ok"]);
  EXPECT_TRUE(ledgerDb->verify()->problems.empty());
}

}  // namespace
}  // namespace tally

namespace tally {
namespace {

class ServiceBoundTest : public ServiceTest {
 protected:
  // A cgroup with one process holding `gttGiB` of GTT through one DRM client.
  void gpuWorkload(const std::string& path, pid_t pid, std::uint64_t clientId, std::uint64_t gttGiB) {
    workloadCgroup(path, true);
    FakeProcess p;
    p.pid = pid;
    p.cgroup = path;
    FakeFd fd;
    fd.drmMinor = 128;
    fd.fdinfo = amdgpuFdinfo(clientId, "0000:c6:00.0", gttGiB * 1024 * 1024, 0);
    p.fds = {fd};
    host.addProcess(p);
    host.addCgroup(path, {pid});
    writeFile(host.cgroupRoot() + path + "/cgroup.kill", "");  // the kernel's file exists; tally never creates it
  }
  bool killed(const std::string& path) { return readFile(host.cgroupRoot() + path + "/cgroup.kill") == "1"; }
};

TEST_F(ServiceBoundTest, AnAttachedLeaseOverItsGpuMemoryMaxIsKilledAfterTwoSamplesAndNothingElseIs) {
  gpuWorkload("/machine.slice/hog.scope", 5001, 11, 4);
  gpuWorkload("/machine.slice/sibling.scope", 5002, 12, 4);
  EXPECT_TRUE(call(9, 1000, "subscribe", json::object())["ok"]);
  json hog = call(1, 0, "attach", {{"pools", {"gpu"}}, {"cgroup", "/machine.slice/hog.scope"}, {"gpu_memory_max", 3 * GiB},
                                   {"gpu_memory_high", 2 * GiB}, {"name", "hog"}});
  ASSERT_TRUE(hog["ok"]) << hog;
  json sib = call(2, 0, "attach", {{"pools", {"gpu"}}, {"cgroup", "/machine.slice/sibling.scope"}, {"gpu_memory_max", 8 * GiB}});
  ASSERT_TRUE(sib["ok"]) << sib;
  std::string id = hog["result"]["lease"];
  service->sample();  // first sample over: not yet
  EXPECT_FALSE(killed("/machine.slice/hog.scope"));
  // gpu_memory_high crossed on that first sample: an event, no kill.
  ASSERT_FALSE(outbox.sent[9].empty());
  EXPECT_EQ(outbox.last(9)["event"], "gpu-bound");
  EXPECT_EQ(outbox.last(9)["kind"], "gpu-memory-high");
  service->sample();
  EXPECT_EQ(readFile(host.cgroupRoot() + "/machine.slice/hog.scope/cgroup.kill"), "1");
  EXPECT_FALSE(killed("/machine.slice/sibling.scope"));
  EXPECT_TRUE(units.kills.empty());  // a plain cgroup: cgroup.kill, not systemd
  json ev = outbox.last(9);
  EXPECT_EQ(ev["kind"], "gpu-memory-kill");
  EXPECT_EQ(ev["lease"], id);
  EXPECT_EQ(ev["bytes"], 4 * GiB);
  EXPECT_EQ(ev["limit"], 3 * GiB);
  std::string summary = "killed by tally: GPU memory 4.0 GiB over gpu_memory_max 3.0 GiB (drm-fdinfo, 2 samples at 1 s)";
  EXPECT_EQ(ev["summary"], summary);
  ASSERT_FALSE(journal.notes.empty());
  EXPECT_EQ(journal.notes.back().priority, 4);
  EXPECT_NE(journal.notes.back().message.find(summary), std::string::npos);
  EXPECT_EQ(journal.notes.back().fields[0], std::make_pair(std::string("TALLY_LEASE"), id));
  // A third sample does not kill again.
  writeFile(host.cgroupRoot() + "/machine.slice/hog.scope/cgroup.kill", "");
  service->sample();
  EXPECT_FALSE(killed("/machine.slice/hog.scope"));
  // The cgroup empties: the outcome names the kill.
  writeFile(host.cgroupRoot() + "/machine.slice/hog.scope/memory.events", "oom 1\noom_kill 1\n");
  writeFile(host.cgroupRoot() + "/machine.slice/hog.scope/cgroup.events", "populated 0\nfrozen 0\n");
  service->cgroupChanged(id);
  EXPECT_EQ(kinds(id), (std::vector<std::string>{"granted", "adopted", "gpu-bound", "gpu-bound", "outcome"}));
  json outcome = json::parse(rows(id).back().body);
  EXPECT_EQ(outcome["outcome"]["class"], "killed-by-tally");
  EXPECT_EQ(outcome["outcome"]["summary"].get<std::string>().rfind(summary, 0), 0u);
  EXPECT_EQ(outcome["gpu"]["bound"]["events"].size(), 2u);
  EXPECT_EQ(outcome["gpu"]["bound"]["action"], "kill");
  EXPECT_EQ(service->liveLeases(), 1u);  // the sibling runs on
}

TEST_F(ServiceBoundTest, AUnitIsKilledThroughSystemdAndReportModeNeverKills) {
  gpuWorkload("/system.slice/llama.service", 5003, 13, 4);
  units.cgroups["llama.service"] = "/system.slice/llama.service";
  gpuWorkload("/machine.slice/watch.scope", 5004, 14, 4);
  json unit = call(1, 0, "attach", {{"pools", {"gpu"}}, {"unit", "llama.service"}, {"gpu_memory_max", GiB}, {"gpu_over_samples", 1}});
  ASSERT_TRUE(unit["ok"]) << unit;
  json rep = call(2, 0, "attach", {{"pools", {"gpu"}}, {"cgroup", "/machine.slice/watch.scope"}, {"gpu_memory_max", GiB},
                                   {"gpu_memory_action", "report"}});
  ASSERT_TRUE(rep["ok"]) << rep;
  for (int i = 0; i < 4; ++i) service->sample();
  ASSERT_EQ(units.kills.size(), 1u);
  EXPECT_EQ(units.kills[0], std::make_pair(std::string("llama.service"), SIGKILL));
  EXPECT_FALSE(killed("/system.slice/llama.service"));
  EXPECT_FALSE(killed("/machine.slice/watch.scope"));
  std::string repId = rep["result"]["lease"];
  EXPECT_EQ(kinds(repId), (std::vector<std::string>{"granted", "adopted", "gpu-bound"}));
  json row = json::parse(rows(repId).back().body);
  EXPECT_EQ(row["kind"], "gpu-memory-max-exceeded");
  EXPECT_EQ(row["samples"], 2);
  EXPECT_EQ(call(3, 0, "attach", {{"pools", {"gpu"}}, {"cgroup", "/machine.slice/x"}, {"gpu_memory_max", GiB},
                                  {"gpu_memory_action", "explode"}})["error"]["code"],
            "invalid-params");
}

TEST_F(ServiceBoundTest, ARunLeasesClientReportsItsBoundEvents) {
  json a = call(1, 1000, "acquire", {{"pools", {"gpu"}}, {"gpu_memory_max", GiB}});
  ASSERT_TRUE(a["ok"]) << a;
  std::string id = a["result"]["lease"];
  json ev = {{"kind", "gpu-memory-kill"}, {"bytes", 2 * GiB}, {"limit", GiB}, {"samples", 2}, {"summary", "killed by tally: ..."}};
  // Not running yet: nothing to report about.
  EXPECT_EQ(call(1, 1000, "bound", {{"lease", id}, {"event", ev}})["error"]["code"], "conflict");
  std::string scope = "/tally-" + id + ".scope";
  workloadCgroup(scope, true, 1000);
  ASSERT_TRUE(call(1, 1000, "started", {{"lease", id}, {"cgroup", scope}})["ok"]);
  EXPECT_EQ(call(2, 1001, "bound", {{"lease", id}, {"event", ev}})["error"]["code"], "forbidden");
  EXPECT_EQ(call(1, 1000, "bound", {{"lease", id}, {"event", {{"kind", "nonsense"}}}})["error"]["code"], "invalid-params");
  EXPECT_TRUE(call(1, 1000, "bound", {{"lease", id}, {"event", ev}})["ok"]);
  EXPECT_EQ(kinds(id), (std::vector<std::string>{"granted", "started", "gpu-bound"}));
  EXPECT_TRUE(ledgerDb->verify()->problems.empty());
}

}  // namespace
}  // namespace tally

namespace tally {
namespace {

coverage::Assessment assessment(coverage::Coverage c, const std::string& kernel) {
  coverage::Assessment a;
  a.kernel = kernel;
  a.verdict.coverage = c;
  a.verdict.line = c == coverage::Coverage::HostAndGtt ? "A lease's MemoryMax covers: host memory + GTT (verified by active probe on " + kernel + ")"
                                                       : "A lease's MemoryMax covers: host memory only";
  return a;
}

TEST_F(ServiceBoundTest, CoverageIsRecordedAndAChangeBetweenStartsIsSaid) {
  service->setCoverage(assessment(coverage::Coverage::HostOnly, "6.12.9"));
  reopen();
  service->setCoverage(assessment(coverage::Coverage::HostOnly, "6.12.9"));
  EXPECT_TRUE(journal.notes.empty());  // nothing changed: nothing said
  reopen();
  service->setCoverage(assessment(coverage::Coverage::HostAndGtt, "7.3.0"));
  auto hostRows = rows("");
  ASSERT_EQ(hostRows.size(), 3u);
  for (const auto& e : hostRows) EXPECT_EQ(e.kind, "coverage");
  json last = json::parse(hostRows.back().body);
  EXPECT_EQ(last["coverage"], "host+gtt");
  EXPECT_EQ(last["changed_from"]["coverage"], "host");
  EXPECT_EQ(last["changed_from"]["kernel"], "6.12.9");
  ASSERT_EQ(journal.notes.size(), 1u);
  EXPECT_NE(journal.notes[0].message.find("GTT coverage changed from host (kernel 6.12.9) to host+gtt (kernel 7.3.0)"), std::string::npos)
      << journal.notes[0].message;
  EXPECT_NE(journal.notes[0].message.find("gpu_memory_max is advisory"), std::string::npos);
  EXPECT_TRUE(ledgerDb->verify()->problems.empty());
}

TEST_F(ServiceBoundTest, WithGttChargedTheBoundIsAdvisoryAndNoByteCountsTwice) {
  service->setCoverage(assessment(coverage::Coverage::HostAndGtt, "7.3.0"));
  gpuWorkload("/machine.slice/charged.scope", 5005, 15, 4);
  // memory.current 5 GiB of which 4 GiB is the GTT the kernel charged.
  writeFile(host.cgroupRoot() + "/machine.slice/charged.scope/memory.current", std::to_string(5 * GiB) + "\n");
  json r = call(1, 0, "attach", {{"pools", {"gpu"}}, {"cgroup", "/machine.slice/charged.scope"}, {"gpu_memory_max", 3 * GiB},
                                 {"memory_max", 2 * GiB}});
  ASSERT_TRUE(r["ok"]) << r;
  EXPECT_EQ(r["result"]["coverage"], "host+gtt");
  EXPECT_EQ(r["result"]["budget_figures"]["host_bytes"], GiB);
  EXPECT_EQ(r["result"]["budget_figures"]["gpu_bytes"], 4 * GiB);
  EXPECT_EQ(r["result"]["budget_figures"]["total_bytes"], 5 * GiB);  // memory.current, not 5 + 4
  EXPECT_EQ(r["result"]["gpu_bound"]["advisory"], true);
  EXPECT_EQ(r["result"]["memory_max_effective"], 5 * GiB);
  std::string id = r["result"]["lease"];
  for (int i = 0; i < 3; ++i) service->sample();
  EXPECT_FALSE(killed("/machine.slice/charged.scope"));
  EXPECT_EQ(json::parse(rows(id).back().body)["kind"], "gpu-memory-max-exceeded");
  // Headroom takes the holder's unused host declaration from its host-only use: 2 - 1 GiB.
  json pools = call(4, 0, "pools", json::object());
  EXPECT_EQ(pools["result"]["pools"][0]["headroom"]["host_bytes"], 100 * GiB - GiB);
}

TEST_F(ServiceBoundTest, OperatorMayKeepGpuMemoryMaxEnforcedAfterTheHandOver) {
  cfg.daemon.keepGpuMemoryMax = true;
  reopen();
  service->setCoverage(assessment(coverage::Coverage::HostAndGtt, "7.3.0"));
  gpuWorkload("/machine.slice/kept.scope", 5006, 16, 4);
  json r = call(1, 0, "attach", {{"pools", {"gpu"}}, {"cgroup", "/machine.slice/kept.scope"}, {"gpu_memory_max", 3 * GiB}});
  ASSERT_TRUE(r["ok"]) << r;
  EXPECT_EQ(r["result"]["gpu_bound"]["advisory"], false);
  service->sample();
  service->sample();
  EXPECT_TRUE(killed("/machine.slice/kept.scope"));
}

}  // namespace
}  // namespace tally

namespace tally {
namespace {

// Seat rows, the overview and the metrics made from it, the lifecycle journal.
class ServiceViewsTest : public ServiceBoundTest {
 protected:
  static constexpr const char* kPodman = "/machine.slice/libpod-3f2a9c0d1b2e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a.scope";
  std::string attachLlama(std::uint64_t gttGiB = 4) {
    gpuWorkload(kPodman, 5010, 21, gttGiB);
    json r = call(1, 0, "attach", {{"pools", {"gpu"}}, {"cgroup", kPodman}, {"gpu_memory_max", 8 * GiB}, {"name", "llama"},
                                   {"attributes", {{"model", "qwen3-32b"}, {"context_window", "32768"}}}});
    EXPECT_TRUE(r["ok"]) << r;
    return r["result"].value("lease", "");
  }
  const FakeJournal::Note* noteWith(const std::string& event, const std::string& lease) {
    for (const auto& n : journal.notes) {
      bool e = false, l = false;
      for (const auto& [k, v] : n.fields) {
        e = e || (k == "TALLY_EVENT" && v == event);
        l = l || (k == "TALLY_LEASE" && v == lease);
      }
      if (e && l) return &n;
    }
    return nullptr;
  }
  static std::string field(const FakeJournal::Note& n, const std::string& key) {
    for (const auto& [k, v] : n.fields) {
      if (k == key) return v;
    }
    return "<absent>";
  }
};

TEST_F(ServiceViewsTest, ASeatRowIsMeasuredDeclaredOrAbsentWithTheReason) {
  std::string id = attachLlama();
  service->sample();
  json reply = call(3, 1000, "seats", json::object());  // any connected user may read seats
  ASSERT_TRUE(reply["ok"]) << reply;
  ASSERT_EQ(reply["result"]["seats"].size(), 1u);
  EXPECT_EQ(reply["result"]["sample_interval_us"], 1'000'000);
  json s = reply["result"]["seats"][0];
  EXPECT_EQ(s["lease"], id);
  EXPECT_EQ(s["name"], "llama");
  EXPECT_EQ(s["kind"], "attach");
  EXPECT_EQ(s["state"], "running");
  EXPECT_EQ(s["pools"], json({"gpu"}));
  EXPECT_EQ(s["workload"]["cgroup"], kPodman);
  EXPECT_EQ(s["workload"]["container"], "podman:3f2a9c0d1b2e");
  EXPECT_EQ(s["running"], true);
  EXPECT_EQ(s["running_source"], "cgroup.events populated");
  EXPECT_EQ(s["fresh"], true);
  EXPECT_TRUE(s["observed_at_ns"].is_number_unsigned());
  EXPECT_EQ(s["host"]["current_bytes"], GiB);      // memory.current of the fixture
  EXPECT_EQ(s["host"]["peak_bytes"], 2 * GiB);     // memory.peak
  EXPECT_TRUE(s["host"]["max_bytes"].is_null());   // memory.max is "max": absent, with the reason
  EXPECT_EQ(s["host"]["max_bytes_unknown"], "memory.max is max: no limit");
  EXPECT_EQ(s["gpu"]["regions"]["gtt"]["current_bytes"], 4 * GiB);
  EXPECT_EQ(s["gpu"]["regions"]["gtt"]["peak_bytes"], 4 * GiB);
  EXPECT_EQ(s["gpu"]["current_bytes"], 4 * GiB);
  EXPECT_EQ(s["gpu"]["limit_bytes"], 8 * GiB);
  EXPECT_EQ(s["gpu"]["source"], "drm-fdinfo");
  EXPECT_EQ(s["devices"], json({"0000:c6:00.0"}));
  EXPECT_EQ(s["declared"]["gpu_memory_max"], 8 * GiB);
  EXPECT_TRUE(s["declared"]["memory_max"].is_null());
  EXPECT_EQ(s["declared"]["attributes"], json({{"context_window", "32768"}, {"model", "qwen3-32b"}}));

  // Three intervals later with no sample in between: stale, and no figure at all.
  std::uint64_t observed = s["observed_at_ns"];
  json stale = service->seats(observed + 3'000'000'000ULL)[0];
  EXPECT_EQ(stale["fresh"], false);
  EXPECT_FALSE(stale.contains("host"));
  EXPECT_FALSE(stale.contains("gpu"));
  EXPECT_EQ(stale["measured_unknown"], "stale: the last sample is older than 2 x sample_interval");
  EXPECT_EQ(stale["declared"]["attributes"]["model"], "qwen3-32b");  // declared facts stay
  // Exactly 2 x interval is still fresh; a sample stamped in the future is not trusted.
  EXPECT_EQ(service->seats(observed + 2'000'000'000ULL)[0]["fresh"], true);
  EXPECT_EQ(service->seats(observed - 1)[0]["fresh"], false);

  // The workload's processes exit: "running" is read now, not at the last sample.
  writeFile(host.cgroupRoot() + kPodman + "/cgroup.events", "populated 0\nfrozen 0\n");
  EXPECT_EQ(service->seats(observed)[0]["running"], false);
}

TEST_F(ServiceViewsTest, AQueuedLeaseHasASeatWithNothingMeasured) {
  workloadCgroup("/system.slice/a.service", true);
  workloadCgroup("/system.slice/b.service", true);
  ASSERT_TRUE(call(1, 0, "attach", {{"pools", {"one"}}, {"cgroup", "/system.slice/a.service"}})["ok"]);
  // Queued: an attach (its workload already runs, outside any lease) and a run lease (nothing runs yet).
  service->handle(2, daemon::Peer{1000, 0, 0}, rpc::Request{json(98), "attach", {{"pools", {"one"}}, {"cgroup", "/system.slice/b.service"}, {"name", "waiting"}}});
  service->handle(3, daemon::Peer{1001, 0, 0}, rpc::Request{json(99), "acquire", {{"pools", {"one"}}, {"name", "batch"}}});
  json seats = service->seats(clock::realtimeNs());
  ASSERT_EQ(seats.size(), 3u);
  json attachQueued = seats[1], runQueued = seats[2];
  EXPECT_EQ(attachQueued["state"], "queued");
  EXPECT_EQ(attachQueued["running"], true);  // measured: its cgroup is populated, the lease just is not granted
  EXPECT_EQ(attachQueued["fresh"], false);
  EXPECT_EQ(attachQueued["measured_unknown"], "the lease is queued, nothing to meter");
  EXPECT_EQ(runQueued["name"], "batch");
  EXPECT_EQ(runQueued["state"], "queued");
  EXPECT_EQ(runQueued["running"], false);
  EXPECT_EQ(runQueued["running_source"], "no cgroup yet: nothing runs in the lease");
  EXPECT_TRUE(runQueued["observed_at_ns"].is_null());
  EXPECT_FALSE(runQueued.contains("host"));
}

TEST_F(ServiceViewsTest, HostileAttributesAreRefusedAndGoodOnesSurviveARestart) {
  workloadCgroup("/system.slice/x.service", true);
  json badKey = call(1, 0, "attach", {{"pools", {"gpu"}}, {"cgroup", "/system.slice/x.service"}, {"attributes", {{"Model", "x"}}}});
  EXPECT_EQ(badKey["error"]["code"], "invalid-params");
  EXPECT_NE(badKey["error"]["message"].get<std::string>().find("[a-z0-9_]"), std::string::npos) << badKey;
  json control = call(1, 0, "attach", {{"pools", {"gpu"}}, {"cgroup", "/system.slice/x.service"}, {"attributes", {{"model", "a\nb"}}}});
  EXPECT_EQ(control["error"]["code"], "invalid-params");
  json many = json::object();
  for (int i = 0; i < 17; ++i) many[fmt::format("k{}", i)] = "v";
  EXPECT_EQ(call(1, 0, "attach", {{"pools", {"gpu"}}, {"cgroup", "/system.slice/x.service"}, {"attributes", many}})["error"]["code"],
            "invalid-params");
  EXPECT_EQ(call(1, 0, "attach", {{"pools", {"gpu"}}, {"cgroup", "/system.slice/x.service"}, {"attributes", "model=x"}})["error"]["code"],
            "invalid-params");
  std::string id = attachLlama();
  reopen();
  ASSERT_TRUE(service->recover());
  service->sample();
  json s = service->seats(clock::realtimeNs())[0];
  EXPECT_EQ(s["lease"], id);
  EXPECT_EQ(s["declared"]["attributes"]["context_window"], "32768");
}

TEST_F(ServiceViewsTest, OverviewAttributesDeviceMemoryAndMetricsCountWhatHappened) {
  std::string id = attachLlama(4);
  service->sample();
  json o = service->overview(clock::realtimeNs());
  // The fixture device: 20 GiB GTT used, 256 MiB VRAM used; the lease holds 4 GiB GTT.
  EXPECT_EQ(o["outside_leases"]["gtt"]["bytes"], 16 * GiB);
  EXPECT_EQ(o["outside_leases"]["gtt"]["device_used_bytes"], 20 * GiB);
  EXPECT_EQ(o["outside_leases"]["vram"]["bytes"], 256ULL << 20);
  EXPECT_EQ(o["devices"][0]["device"], "0000:c6:00.0");
  EXPECT_EQ(o["devices"][0]["regions"]["gtt"]["total_bytes"], 120 * GiB);
  EXPECT_EQ(o["host"]["mem_available_bytes"], 100 * GiB);
  EXPECT_EQ(o["coverage"]["state"], "host");
  EXPECT_EQ(o["daemon"]["leases_live"], 1u);

  std::string text = call(3, 1000, "metrics", json::object())["result"]["text"];
  auto has = [&](const std::string& line) { return text.find(line + "\n") != std::string::npos; };
  EXPECT_TRUE(has(fmt::format("tally_lease_gpu_memory_bytes{{lease=\"{}\",region=\"gtt\",source=\"drm-fdinfo\"}} 4294967296", id))) << text;
  EXPECT_TRUE(has(fmt::format("tally_lease_gpu_memory_counted_bytes{{lease=\"{}\"}} 4294967296", id)));
  EXPECT_TRUE(has(fmt::format("tally_lease_declared_gpu_memory_max_bytes{{lease=\"{}\"}} 8589934592", id)));
  EXPECT_TRUE(has(fmt::format("tally_lease_memory_bytes{{lease=\"{}\"}} 1073741824", id)));
  EXPECT_TRUE(has(fmt::format("tally_lease_declared_info{{lease=\"{}\",key=\"model\",value=\"qwen3-32b\"}} 1", id)));
  EXPECT_TRUE(has("tally_gpu_memory_outside_leases_bytes{region=\"gtt\"} 17179869184"));
  EXPECT_TRUE(has("tally_device_memory_used_bytes{device=\"0000:c6:00.0\",driver=\"amdgpu\",region=\"gtt\"} 21474836480"));
  EXPECT_TRUE(has("tally_pool_holders{pool=\"gpu\"} 1"));
  EXPECT_TRUE(has("tally_coverage_info{coverage=\"host\",kernel=\"\"} 1"));
  EXPECT_TRUE(has("tally_memcg_charges_gtt 0"));
  EXPECT_TRUE(has("tally_gpu_bound_events_total{kind=\"gpu-memory-kill\"} 0"));
  EXPECT_TRUE(has("# TYPE tally_lease_outcomes_total counter"));
  // memory.max is "max": no sample for the limit, never a 0.
  EXPECT_EQ(text.find(fmt::format("tally_lease_memory_max_bytes{{lease=\"{}\"}}", id)), std::string::npos);

  // The lease grows past its gpu_memory_max: killed after two samples, then it ends.
  writeFile(host.procRoot() + "/5010/fdinfo/3", amdgpuFdinfo(21, "0000:c6:00.0", 9 * 1024 * 1024, 0));
  service->sample();
  service->sample();
  ASSERT_TRUE(killed(kPodman));
  writeFile(host.cgroupRoot() + kPodman + "/cgroup.events", "populated 0\nfrozen 0\n");
  service->cgroupChanged(id);
  text = call(3, 1000, "metrics", json::object())["result"]["text"];
  EXPECT_TRUE(has("tally_gpu_bound_events_total{kind=\"gpu-memory-kill\"} 1")) << text;
  EXPECT_TRUE(has("tally_lease_outcomes_total{outcome=\"killed-by-tally\"} 1")) << text;
  EXPECT_EQ(text.find(fmt::format("lease=\"{}\"", id)), std::string::npos);  // an ended lease has no seat

  // Its life in the journal, with the structured fields.
  const auto* granted = noteWith("lease-granted", id);
  ASSERT_NE(granted, nullptr);
  EXPECT_EQ(field(*granted, "TALLY_POOL"), "gpu");
  EXPECT_EQ(field(*granted, "TALLY_LEASE_NAME"), "llama");
  const auto* adopted = noteWith("lease-adopted", id);
  ASSERT_NE(adopted, nullptr);
  EXPECT_EQ(field(*adopted, "TALLY_CGROUP"), kPodman);
  const auto* ended = noteWith("lease-outcome", id);
  ASSERT_NE(ended, nullptr);
  EXPECT_EQ(ended->priority, 4);
  EXPECT_EQ(field(*ended, "TALLY_OUTCOME"), "killed-by-tally");
  EXPECT_EQ(field(*ended, "TALLY_MEMORY_PEAK_BYTES"), "2147483648");
  EXPECT_EQ(field(*ended, "TALLY_GPU_PEAK_BYTES"), std::to_string(9 * GiB));
  EXPECT_EQ(field(*ended, "TALLY_EXIT_CODE"), "<absent>");  // an attached workload has none
}

}  // namespace
}  // namespace tally

// The attacks of "the daemon survives every client" that reach the service,
// each answered with an error naming the field or the state, never a crash.
namespace tally {
namespace {

using namespace tally::testing;
using json = nlohmann::json;
constexpr std::uint64_t kGiB = 1ULL << 30;

class HostileServiceTest : public ServiceTest {
 protected:
  // A run lease of `uid`, started in its own scope; returns its id.
  std::string runningLease(std::uint64_t conn, std::uint32_t uid, const std::string& pool = "gpu") {
    json a = call(conn, uid, "acquire", {{"pools", {pool}}, {"gpu_memory_max", kGiB}});
    EXPECT_TRUE(a["ok"]) << a;
    std::string id = a["result"]["lease"];
    std::string slice = "/tally.slice/tally-" + id + ".slice";
    workloadCgroup(slice, true, uid);
    workloadCgroup(slice + "/tally-" + id + ".scope", true, uid);
    json s = call(conn, uid, "started", {{"lease", id}, {"cgroup", slice + "/tally-" + id + ".scope"}, {"counters_cgroup", slice}});
    EXPECT_TRUE(s["ok"]) << s;
    return id;
  }
};

// Why 1: the three requests that stopped the daemon.
TEST_F(HostileServiceTest, WrongTypesAreInvalidParamsNamingTheField) {
  std::string id = runningLease(1, 1000);
  json r = call(1, 1000, "bound", {{"lease", id}, {"event", {{"kind", 5}}}});
  EXPECT_EQ(r["error"]["code"], "invalid-params");
  EXPECT_NE(r["error"]["message"].get<std::string>().find("\"event.kind\""), std::string::npos) << r;
  r = call(1, 1000, "complete", {{"lease", id}, {"record", {{"lease", {{"id", 7}}}}}});
  EXPECT_EQ(r["error"]["code"], "invalid-params");
  EXPECT_NE(r["error"]["message"].get<std::string>().find("record.lease.id"), std::string::npos) << r;
  r = call(1, 1000, "bound", {{"lease", id}, {"event", {{"kind", "gpu-memory-high"}, {"bytes", "lots"}, {"limit", 1}, {"summary", "x"}}}});
  EXPECT_NE(r["error"]["message"].get<std::string>().find("\"event.bytes\""), std::string::npos) << r;
  r = call(1, 1000, "acquire", {{"pools", {"gpu"}}, {"gpu_memory_max", kGiB}, {"colour", "blue"}});
  EXPECT_EQ(r["error"]["code"], "invalid-params");
  EXPECT_NE(r["error"]["message"].get<std::string>().find("unknown field \"colour\""), std::string::npos) << r;
  r = call(1, 1000, "acquire", {{"pools", {"gpu", 3}}, {"gpu_memory_max", kGiB}});
  EXPECT_NE(r["error"]["message"].get<std::string>().find("\"pools\"[1]"), std::string::npos) << r;
  // A summary of 511 'a' and one two-byte character is cut before the
  // character, not through it, and the row is valid UTF-8 JSON.
  std::string summary = std::string(511, 'a') + "\xc3\xa9";
  r = call(1, 1000, "bound", {{"lease", id}, {"event", {{"kind", "gpu-memory-high"}, {"bytes", 2 * kGiB}, {"limit", kGiB}, {"summary", summary}}}});
  ASSERT_TRUE(r["ok"]) << r;
  json stored = json::parse(rows(id).back().body);
  EXPECT_EQ(stored["summary"], std::string(511, 'a'));
  // And the service still answers.
  EXPECT_TRUE(call(2, 0, "hello", json::object())["ok"]);
}

// Why 8: one cgroup has one spelling; aliases neither dodge the rules nor hold three slots.
TEST_F(HostileServiceTest, PathAliasesAreOneCgroupAndCrossNoPrivilegeLine) {
  // uid 1002's delegated user manager cgroup: the directory is theirs, its
  // own memory.max is root's (systemd delegates the inside, not the limit).
  std::string user = "/user.slice/user-1002.slice/user@1002.service";
  workloadCgroup(user, true, 1002);
  for (const char* alias : {"/.", "//", "/./"}) {
    std::string path = user + alias;
    json r = call(1, 1002, "attach", {{"pools", {"gpu"}}, {"cgroup", path}, {"memory_max", 8 * kGiB}, {"gpu_memory_max", kGiB}});
    EXPECT_EQ(r["error"]["code"], "forbidden") << path << " " << r;
  }
  EXPECT_EQ(readFile(host.cgroupRoot() + user + "/memory.max"), "max\n");  // never written
  EXPECT_EQ(call(1, 1002, "attach", {{"pools", {"gpu"}}, {"cgroup", user + "/.."}, {"gpu_memory_max", kGiB}})["error"]["code"],
            "invalid-params");
  // /x, /x/. and //x are one cgroup: the second and third are conflicts.
  workloadCgroup("/system.slice/x.service", true);
  json first = call(1, 0, "attach", {{"pools", {"gpu"}}, {"cgroup", "/system.slice/x.service"}, {"gpu_memory_max", kGiB}});
  ASSERT_TRUE(first["ok"]) << first;
  for (const char* alias : {"/system.slice/x.service/.", "//system.slice//x.service", "/system.slice/./x.service/"}) {
    json r = call(1, 0, "attach", {{"pools", {"gpu"}}, {"cgroup", alias}, {"gpu_memory_max", kGiB}});
    EXPECT_EQ(r["error"]["code"], "conflict") << alias << " " << r;
  }
  // A symlink in a fixture tree is not a way in either.
  ASSERT_EQ(::symlink((host.cgroupRoot() + "/system.slice").c_str(), (host.cgroupRoot() + "/link").c_str()), 0);
  json viaLink = call(1, 0, "attach", {{"pools", {"gpu"}}, {"cgroup", "/link/x.service"}, {"gpu_memory_max", kGiB}});
  EXPECT_EQ(viaLink["error"]["code"], "not-found") << viaLink;
  EXPECT_NE(viaLink["error"]["message"].get<std::string>().find("symlink"), std::string::npos) << viaLink;
}

TEST_F(HostileServiceTest, CountersCgroupIsTheLeasesOwn) {
  json a = call(1, 1000, "acquire", {{"pools", {"gpu"}}, {"gpu_memory_max", kGiB}});
  std::string id = a["result"]["lease"];
  std::string slice = "/tally.slice/tally-" + id + ".slice";
  std::string scope = slice + "/tally-" + id + ".scope";
  workloadCgroup(slice, true, 1000);
  workloadCgroup(scope, true, 1000);
  workloadCgroup("/system.slice", true, 1000);  // even one the caller owns
  json r = call(1, 1000, "started", {{"lease", id}, {"cgroup", scope}, {"counters_cgroup", "/system.slice"}});
  EXPECT_EQ(r["error"]["code"], "forbidden") << r;
  EXPECT_NE(r["error"]["message"].get<std::string>().find("counters_cgroup"), std::string::npos) << r;
  EXPECT_TRUE(call(1, 1000, "started", {{"lease", id}, {"cgroup", scope}, {"counters_cgroup", slice}})["ok"]);
}

// Why 9: the state machine does not trust its client.
TEST_F(HostileServiceTest, OutcomesOnlyForRunningLeasesAndBoundEventsAreRateLimited) {
  json a = call(1, 1000, "acquire", {{"pools", {"one"}}});
  std::string granted = a["result"]["lease"];
  call(2, 1000, "acquire", {{"pools", {"one"}}});
  std::string queued = outbox.last(2)["lease"];
  json record = {{"lease", {{"id", queued}}}, {"outcome", {{"class", "exited"}}}};
  json r = call(2, 1000, "complete", {{"lease", queued}, {"record", record}});
  EXPECT_EQ(r["error"]["code"], "conflict") << r;
  EXPECT_TRUE(rows(queued).empty());  // no outcome without a grant
  record["lease"]["id"] = granted;
  r = call(1, 1000, "complete", {{"lease", granted}, {"record", record}});
  EXPECT_EQ(r["error"]["code"], "conflict") << r;  // granted, never started: nothing ran
  EXPECT_EQ(kinds(granted), (std::vector<std::string>{"granted"}));
  // No phantom holder: releasing the grant lets the queued request in.
  EXPECT_TRUE(call(1, 1000, "release", {{"lease", granted}})["ok"]);
  EXPECT_EQ(outbox.last(2)["result"]["lease"], queued);
  EXPECT_EQ(service->queuedRequests(), 0u);

  std::string id = runningLease(3, 1000);
  json ev = {{"kind", "gpu-memory-high"}, {"bytes", 2 * kGiB}, {"limit", kGiB}, {"summary", "over"}};
  int recorded = 0, limited = 0;
  for (int i = 0; i < 100; ++i) {
    json b = call(3, 1000, "bound", {{"lease", id}, {"event", ev}});
    if (b["ok"] == true) ++recorded;
    else if (b["error"]["code"] == "rate-limited") ++limited;
  }
  EXPECT_EQ(recorded, 20);  // the burst (Limits::boundBurst); the refill in this loop's time is < 1
  EXPECT_EQ(limited, 80);
  std::size_t boundRows = 0;
  for (const auto& k : kinds(id)) boundRows += k == "gpu-bound";
  EXPECT_EQ(boundRows, 20u);
}

// Why 3: what one connection, and everyone, may keep waiting.
TEST_F(HostileServiceTest, QueuedRequestsAreCappedPerConnectionAndInTotal) {
  ASSERT_TRUE(call(1, 1000, "acquire", {{"pools", {"one"}}})["ok"]);
  for (int i = 0; i < 64; ++i) call(2, 1000, "acquire", {{"pools", {"one"}}});
  EXPECT_EQ(service->queuedRequests(), 64u);
  json over = call(2, 1000, "acquire", {{"pools", {"one"}}});
  EXPECT_EQ(over["error"]["code"], "busy");
  EXPECT_NE(over["error"]["message"].get<std::string>().find("64"), std::string::npos);
  // Another connection may still queue; the total cap holds for all.
  cfg.daemon.maxQueued = 66;
  service.reset();
  daemon::ServiceEnv env{*proc, *sys, &*cgroup, outbox, watches, &units, 4096, &journal};
  env.limits.maxQueued = 66;
  service = std::make_unique<daemon::Service>(cfg, *ledgerDb, env);
  ASSERT_TRUE(call(1, 1000, "acquire", {{"pools", {"one"}}})["ok"]);
  for (int c = 10; c < 13; ++c) {
    for (int i = 0; i < 22; ++i) call(static_cast<std::uint64_t>(c), 1000, "acquire", {{"pools", {"one"}}});
  }
  EXPECT_EQ(service->queuedRequests(), 66u);
  EXPECT_EQ(call(20, 1000, "acquire", {{"pools", {"one"}}})["error"]["code"], "busy");
  // A connection that goes away frees its places.
  service->disconnected(10);
  EXPECT_EQ(service->queuedRequests(), 44u);
  EXPECT_EQ(outbox.last(20)["error"]["code"], "busy");
  call(20, 1000, "acquire", {{"pools", {"one"}}});
  EXPECT_EQ(outbox.last(20)["event"], "queued");
}

// Why 12: a memory limit below one page is refused (the kernel would make it 0).
TEST_F(HostileServiceTest, AMemoryMaxBelowOnePageIsRefused) {
  workloadCgroup("/system.slice/x.service", true);
  json r = call(1, 0, "attach", {{"pools", {"one"}}, {"cgroup", "/system.slice/x.service"}, {"memory_max", 1}});
  EXPECT_EQ(r["error"]["code"], "invalid-params");
  EXPECT_NE(r["error"]["message"].get<std::string>().find("below one page"), std::string::npos) << r;
  EXPECT_EQ(readFile(host.cgroupRoot() + "/system.slice/x.service/memory.max"), "max\n");
}

// Why 12: a run lease whose client was killed leaves its slice; the daemon,
// closing the lease as lost, stops that slice and nothing else.
TEST_F(HostileServiceTest, ALostRunLeasesSliceIsStopped) {
  std::string id = runningLease(1, 0, "one");
  std::string scope = "/tally.slice/tally-" + id + ".slice/tally-" + id + ".scope";
  service->disconnected(1);
  writeFile(host.cgroupRoot() + scope + "/cgroup.events", "populated 0\nfrozen 0\n");
  writeFile(host.cgroupRoot() + "/tally.slice/tally-" + id + ".slice/cgroup.events", "populated 0\nfrozen 0\n");
  service->tick();  // the grace (0 here) passed without the client
  EXPECT_EQ(kinds(id).back(), "lost");
  EXPECT_EQ(units.stops, std::vector<std::string>{"tally-" + id + ".slice"});
}

// Why 2 (the service side): every exception is the request's own. A seam
// that throws is answered "internal" and the next request is served.
struct ThrowingUnits : daemon::Units {
  Result<std::string> controlGroup(const std::string&) override { throw std::runtime_error("boom"); }
  Status setMemoryMax(const std::string&, std::uint64_t) override { return Ok{}; }
  Status killUnit(const std::string&, int) override { return Ok{}; }
  Status stopUnit(const std::string&) override { return Ok{}; }
};

TEST_F(HostileServiceTest, AnExceptionIsAnsweredInternalAndTheDaemonGoesOn) {
  ThrowingUnits throwing;
  daemon::ServiceEnv env{*proc, *sys, &*cgroup, outbox, watches, &throwing, 4096, &journal};
  daemon::Service s(cfg, *ledgerDb, env);
  daemon::Dispatcher dispatcher(s, outbox);
  dispatcher.line(5, daemon::Peer{1, 0, 0}, {R"({"v":1,"id":9,"method":"attach","params":{"pools":["one"],"unit":"x.service"}})", false});
  EXPECT_EQ(outbox.last(5)["error"]["code"], "internal");
  EXPECT_EQ(outbox.last(5)["id"], 9);
  EXPECT_EQ(dispatcher.internalErrors(), 1u);
  dispatcher.line(5, daemon::Peer{1, 0, 0}, {R"({"v":1,"id":10,"method":"hello"})", false});
  EXPECT_TRUE(outbox.last(5)["ok"]);
  // Deep nesting is refused before any parser recursion.
  std::string deep = R"({"v":1,"id":)" + std::string(80000, '[');
  dispatcher.line(5, daemon::Peer{1, 0, 0}, {deep, false});
  EXPECT_EQ(outbox.last(5)["error"]["code"], "too-deep");
}

}  // namespace
}  // namespace tally
