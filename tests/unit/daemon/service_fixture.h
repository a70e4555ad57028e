// The fixtures of the lease service's tests: the real daemon::Service on a
// synthetic host (fake /proc, /sys and cgroup trees), an in-memory outbox,
// watches, systemd and journal that record every side effect, and a real
// ledger in a temp dir.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>

#include "cgroup/tree_watch.h"
#include "daemon/dispatch.h"
#include "daemon/service.h"
#include "support/fake_host.h"
#include "util/clock.h"

namespace tally::testing {

using json = nlohmann::json;
constexpr std::uint64_t GiB = 1ULL << 30;

struct FakeOutbox : daemon::Outbox {
  std::map<std::uint64_t, std::vector<json>> sent;
  bool send(std::uint64_t conn, std::string line) override {
    sent[conn].push_back(json::parse(line));
    return true;
  }
  json last(std::uint64_t conn) { return sent[conn].empty() ? json() : sent[conn].back(); }
  unsigned turnsWanted = 0;
  void wantTurn() override { ++turnsWanted; }
  std::map<std::uint64_t, std::size_t> unread;  // a client's backlog, as a test sets it
  std::size_t backlog(std::uint64_t conn) const override {
    auto it = unread.find(conn);
    return it == unread.end() ? 0 : it->second;
  }
};

struct FakeWatches : daemon::Watches {
  std::map<std::string, std::string> paths;  // each lease's cgroup.events watch
  std::map<std::string, std::vector<std::string>> all;
  Status watch(const std::string& id, const std::string& path) override {
    if (path.ends_with("/cgroup.events")) paths[id] = path;
    all[id].push_back(path);
    return Ok{};
  }
  std::map<std::string, pid_t> pids;
  bool watchPid(const std::string& id, pid_t pid) override {
    pids[id] = pid;
    return true;
  }
  void unwatch(const std::string& id) override {
    paths.erase(id);
    all.erase(id);
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
  // run(): a unit in `runs` says that; one only in `cgroups` is active with
  // a fixed invocation; any other is inactive (a unit file never started).
  std::map<std::string, daemon::UnitRun> runs;
  Result<daemon::UnitRun> run(const std::string& unit) override {
    if (auto it = runs.find(unit); it != runs.end()) return it->second;
    if (auto it = cgroups.find(unit); it != cgroups.end())
      return daemon::UnitRun{"active", "running", "00000000000000000000000000000001", it->second,
                             ""};
    return daemon::UnitRun{"inactive", "dead", "", "", ""};
  }
  std::vector<std::string> watched;
  Status watchUnit(const std::string& unit) override {
    watched.push_back(unit);
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
  void note(int priority, const std::string& message,
            const std::vector<std::pair<std::string, std::string>>& fields) override {
    notes.push_back({priority, message, fields});
  }
};

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    clockStep = 1'000'000;  // a test that moves the clock itself set it to 0
    host.setMemAvailable(100 * GiB);
    FakeDevice apu;
    apu.memInfo = {{"gtt_total", 120 * GiB},
                   {"gtt_used", 20 * GiB},
                   {"vram_total", 512ULL << 20},
                   {"vram_used", 256ULL << 20}};
    host.addDevice(apu);
    makeDirs(host.cgroupRoot());
    units.cgroupRoot = host.cgroupRoot();
    cfg.daemon.clientGraceUs = 0;
    cfg.pools = {config::Pool{"gpu", 4, std::nullopt, 96 * GiB, {}},
                 config::Pool{"one", 1, std::nullopt, std::nullopt, {}}};
    reopen();
  }
  void reopen() {
    service.reset();
    ledgerDb.reset();
    ledgerDb.emplace(std::move(*ledger::Ledger::open(state.path())));
    proc.emplace(std::move(*fs::Root::open(host.procRoot())));
    sys.emplace(std::move(*fs::Root::open(host.sysRoot())));
    cgroup.emplace(std::move(*fs::Root::open(host.cgroupRoot())));
    daemon::ServiceEnv env{*proc, *sys, &*cgroup, outbox, watches, &units, 4096, &journal, limits};
    env.monotonicUs = &fakeMonotonicUs;
    env.kernelCharge = kernelCharge;
    env.names = namesOverride;
    env.treeWatcher = treeWatcher.get();
    env.build = {"0.9.0-test", "feedc0ffee12"};
    env.cannotContain = cannotContain;
    env.readConfig = readConfig;
    service = std::make_unique<daemon::Service>(cfg, *ledgerDb, env);
  }
  // The sampler's clock. By default every reading is 1 s after the last, so
  // each sample() finds every lease due, as a real tick of sample_interval
  // would; a test of the cadence sets `clockStep` to 0 and moves `clockUs`.
  static inline std::uint64_t clockUs = 1'000'000'000;
  static inline std::uint64_t clockStep = 1'000'000;
  static std::uint64_t fakeMonotonicUs() { return clockUs += clockStep; }
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
    writeFile(dir + "/memory.events",
              "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\noom_group_kill 0\n");
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
  daemon::Limits limits;
  FakeOutbox outbox;
  FakeWatches watches;
  FakeUnits units;
  FakeJournal journal;
  std::optional<ledger::Ledger> ledgerDb;
  const daemon::NameLookup* namesOverride = nullptr;   // null: the system's
  std::vector<std::string> cannotContain;              // what startup found (empty: can)
  std::function<Result<config::Config>()> readConfig;  // a reload's config (null: none)
  // Follows the leases' trees by inotify when a test sets it (null: whole walks).
  std::unique_ptr<cgroup::TreeWatcher> treeWatcher;
  std::optional<fs::Root> proc, sys, cgroup;
  std::unique_ptr<daemon::Service> service;
  bpf::KernelCharge* kernelCharge = nullptr;  // the kernel charge a test gives the daemon
  int next = 1;
};

class ServiceBoundTest : public ServiceTest {
 protected:
  // A cgroup with one process holding `gttGiB` of GTT through one DRM client.
  void gpuWorkload(const std::string& path, pid_t pid, std::uint64_t clientId,
                   std::uint64_t gttGiB) {
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
    writeFile(host.cgroupRoot() + path + "/cgroup.kill",
              "");  // the kernel's file exists; tally never creates it
  }
  bool killed(const std::string& path) {
    return readFile(host.cgroupRoot() + path + "/cgroup.kill") == "1";
  }
};

// Seat rows, the overview and the metrics made from it, the lifecycle journal.
class ServiceViewsTest : public ServiceBoundTest {
 protected:
  static constexpr const char* kPodman =
      "/machine.slice/"
      "libpod-3f2a9c0d1b2e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a.scope";
  std::string attachLlama(std::uint64_t gttGiB = 4) {
    gpuWorkload(kPodman, 5010, 21, gttGiB);
    json r = call(1, 0, "attach",
                  {{"pools", {"gpu"}},
                   {"cgroup", kPodman},
                   {"gpu_memory_max", 8 * GiB},
                   {"name", "llama"},
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

}  // namespace tally::testing
