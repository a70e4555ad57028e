// Declared leases ([leases.*]): the daemon leases a unit at every run,
// following systemd's signals (here: the test calls unitChanged as the
// signal would), one lease and one ledger row set per run.
#include <cstdio>

#include "daemon/service_fixture.h"

namespace tally::testing {
namespace {

constexpr const char* kUnit = "llama.service";
constexpr const char* kCg = "/system.slice/llama.service";
constexpr const char* kRun1 = "11111111111111111111111111111111";
constexpr const char* kRun2 = "22222222222222222222222222222222";

class DeclaredLeaseTest : public ServiceTest {
 protected:
  void declare(const std::string& pools = "[\"gpu\"]") {
    auto p = config::parse(fmt::format("[pools.gpu]\ncapacity = 4\n[pools.one]\ncapacity = 1\n"
                                       "[leases.llama]\nunit = \"{}\"\npools = {}\n"
                                       "memory_max = \"8GiB\"\ngpu_memory_max = "
                                       "\"16GiB\"\nattributes = {{ model = \"qwen\" }}\n",
                                       kUnit, pools),
                           "t.toml");
    ASSERT_TRUE(p.config) << config::formatProblems(p, "t.toml");
    cfg.leases = p.config->leases;
    reopen();
  }
  // The unit runs (run `invocation`) in a fresh cgroup at its path; an
  // earlier run's directory is moved aside, as the held fd of its lease
  // still sees it (systemd removes it; the kernel keeps it for the fd).
  void unitRuns(const std::string& invocation) {
    std::string dir = host.cgroupRoot() + kCg;
    if (::access(dir.c_str(), F_OK) == 0) {
      std::string aside = dir + "-" + std::to_string(++moved);
      ASSERT_EQ(std::rename(dir.c_str(), aside.c_str()), 0);
      writeFile(aside + "/cgroup.events", "populated 0\nfrozen 0\n");
    }
    workloadCgroup(kCg, true);
    units.cgroups[kUnit] = kCg;
    units.runs[kUnit] = daemon::UnitRun{"active", "running", invocation, kCg, ""};
  }
  std::vector<std::string> leaseIds() {
    std::vector<std::string> ids;
    auto events = ledgerDb->events();  // held: a range-for over *temporary would dangle
    for (const auto& e : *events)
      if (e.kind == "granted") ids.push_back(e.leaseId);
    return ids;
  }
  json outcomeOf(const std::string& id) { return json::parse(rows(id).back().body); }
  int moved = 0;
};

TEST_F(DeclaredLeaseTest, EveryRunOfTheUnitIsItsOwnLeaseAndItsOwnRows) {
  declare();
  unitRuns(kRun1);
  auto log = service->startDeclared();
  EXPECT_EQ(units.watched, std::vector<std::string>{kUnit});  // signals, not polling
  ASSERT_EQ(log.size(), 1u);
  auto first = leaseIds();
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(log[0], fmt::format("[leases.llama] llama.service: leased ({})", first[0]));
  EXPECT_EQ(kinds(first[0]), (std::vector<std::string>{"granted", "adopted"}));
  json granted = json::parse(rows(first[0])[0].body);
  EXPECT_EQ(granted["name"], "llama");
  EXPECT_EQ(granted["declared"]["attributes"]["model"], "qwen") << granted.dump(2);
  ASSERT_EQ(units.memoryMaxCalls.size(), 1u);
  EXPECT_EQ(units.memoryMaxCalls[0], std::make_pair(std::string(kUnit), 8 * GiB));

  // A signal that changes nothing about the run (StatusText, say) leaves it alone.
  service->unitChanged(kUnit);
  EXPECT_EQ(leaseIds().size(), 1u);
  EXPECT_EQ(service->liveLeases(), 1u);

  // systemctl restart: the new run is up before the old cgroup's event is read.
  unitRuns(kRun2);
  service->unitChanged(kUnit);
  auto both = leaseIds();
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(kinds(first[0]).back(), "outcome");
  EXPECT_EQ(outcomeOf(first[0])["outcome"]["summary"],
            "unit llama.service restarted (a new run, invocation 222222222222); its next run is "
            "leased again ([leases.llama])");
  EXPECT_EQ(outcomeOf(first[0])["outcome"]["class"], "ended");
  EXPECT_EQ(kinds(both[1]), (std::vector<std::string>{"granted", "adopted"}));
  EXPECT_EQ(service->liveLeases(), 1u);
  // The late inotify of the old run finds nothing more to do.
  service->cgroupChanged(first[0]);
  EXPECT_EQ(leaseIds().size(), 2u);

  // systemctl stop: the cgroup empties, the unit is inactive; nothing runs unleased.
  writeFile(host.cgroupRoot() + kCg + "/cgroup.events", "populated 0\nfrozen 0\n");
  units.runs[kUnit] = daemon::UnitRun{"inactive", "dead", kRun2, "", ""};
  service->cgroupChanged(both[1]);
  EXPECT_EQ(outcomeOf(both[1])["outcome"]["summary"],
            "unit llama.service stopped; leased again when it next starts ([leases.llama])");
  EXPECT_EQ(service->liveLeases(), 0u);
  service->unitChanged(kUnit);  // inactive: no lease
  EXPECT_EQ(leaseIds().size(), 2u);
}

TEST_F(DeclaredLeaseTest, ARunWithoutRoomIsSaidOnceAndLeasedWhenRoomFrees) {
  declare("[\"one\"]");
  workloadCgroup("/other.scope", true);
  json holder = call(1, 0, "attach", {{"pools", {"one"}}, {"cgroup", "/other.scope"}});
  ASSERT_TRUE(holder["ok"]) << holder;
  unitRuns(kRun1);
  auto log = service->startDeclared();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_NE(log[0].find("[leases.llama] llama.service: runs unleased: it cannot be granted now"),
            std::string::npos)
      << log[0];
  EXPECT_EQ(service->liveLeases(), 1u);
  service->unitChanged(kUnit);  // tried again, refused again, not said again
  auto warnings = [this] {
    int n = 0;
    for (const auto& note : journal.notes)
      for (const auto& [k, v] : note.fields)
        if (k == "TALLY_DECLARED" && v == "llama") ++n;
    return n;
  };
  EXPECT_EQ(warnings(), 1);
  call(1, 0, "release", {{"lease", holder["result"]["lease"]}});
  service->tick();  // the once-a-second retry of a run that waits for room
  ASSERT_EQ(leaseIds().size(), 2u);
  EXPECT_EQ(service->liveLeases(), 1u);
}

TEST_F(DeclaredLeaseTest, AUnitThatIsNotRunningIsLeasedWhenSystemdSaysItStarted) {
  declare();
  auto log = service->startDeclared();
  EXPECT_EQ(log, std::vector<std::string>{
                     "[leases.llama] llama.service: not running; leased when it starts"});
  EXPECT_EQ(service->liveLeases(), 0u);
  // Start-pre: not yet (its main process is not there to meter).
  workloadCgroup(kCg, true);
  units.cgroups[kUnit] = kCg;
  units.runs[kUnit] = daemon::UnitRun{"activating", "start-pre", kRun1, kCg, "start"};
  service->unitChanged(kUnit);
  EXPECT_EQ(service->liveLeases(), 0u);
  units.runs[kUnit] = daemon::UnitRun{"active", "running", kRun1, kCg, ""};
  service->unitChanged(kUnit);
  EXPECT_EQ(service->liveLeases(), 1u);
}

TEST_F(DeclaredLeaseTest, AReleasedRunIsNotLeasedAgainItsNextRunIs) {
  declare();
  unitRuns(kRun1);
  service->startDeclared();
  auto ids = leaseIds();
  ASSERT_EQ(ids.size(), 1u);
  call(1, 0, "release", {{"lease", ids[0]}});
  service->unitChanged(kUnit);
  EXPECT_EQ(service->liveLeases(), 0u);  // the operator took this run out
  unitRuns(kRun2);
  service->unitChanged(kUnit);
  EXPECT_EQ(service->liveLeases(), 1u);
  EXPECT_EQ(leaseIds().size(), 2u);
}

// The case: an attached unit restarts; nothing declares it. Its
// lease ends saying so, and the next run is not silently unleased.
TEST_F(DeclaredLeaseTest, AnUndeclaredAttachedUnitThatRestartsEndsSayingItsNextRunIsNotLeased) {
  unitRuns(kRun1);
  json r =
      call(1, 0, "attach", {{"pools", {"gpu"}}, {"unit", kUnit}, {"gpu_memory_max", 16 * GiB}});
  ASSERT_TRUE(r["ok"]) << r;
  std::string id = r["result"]["lease"];
  writeFile(host.cgroupRoot() + kCg + "/cgroup.events", "populated 0\nfrozen 0\n");
  units.runs[kUnit] = daemon::UnitRun{"inactive", "dead", kRun1, "", "restart"};
  service->cgroupChanged(id);
  EXPECT_EQ(outcomeOf(id)["outcome"]["summary"],
            "unit llama.service is restarting (a restart job); its next run is not leased: tally "
            "attach --unit llama.service again, or declare it in [leases.NAME] to lease every run");
  EXPECT_EQ(service->liveLeases(), 0u);
  // The journal's outcome line says it too.
  bool said = false;
  for (const auto& n : journal.notes)
    said = said || n.message.find("its next run is not leased") != std::string::npos;
  EXPECT_TRUE(said);
}

}  // namespace
}  // namespace tally::testing

namespace tally::testing {
namespace {

// A reload adds, changes and removes declarations without a restart: a new
// one leases its running unit at once; a changed one leaves the live lease
// as granted and applies from the unit's next run; a removed one's live
// lease ends with its run, and the next run is not leased.
TEST_F(DeclaredLeaseTest, AReloadFollowsNewDeclarationsAndLeavesLiveLeasesAsGranted) {
  std::string leases;
  readConfig = [&]() -> Result<config::Config> {
    auto p = config::parse(
        "[pools.gpu]\ncapacity = 4\ngpu_memory_budget = \"96GiB\"\n[pools.one]\ncapacity = 1\n" +
            leases,
        "t.toml");
    if (!p.config) return Error{0, config::formatProblems(p, "t.toml")};
    return *p.config;
  };
  reopen();
  unitRuns(kRun1);
  EXPECT_TRUE(service->startDeclared().empty());
  auto has = [](const json& r, const std::string& line) {
    for (const auto& l : r["result"]["changes"])
      if (l == line) return true;
    return false;
  };

  leases = fmt::format(
      "[leases.llama]\nunit = \"{}\"\npools = [\"gpu\"]\nmemory_max = \"8GiB\"\n"
      "gpu_memory_max = \"16GiB\"\n",
      kUnit);
  json added = call(9, 0, "reload", json::object());
  ASSERT_TRUE(added["ok"]) << added;
  auto ids = leaseIds();
  ASSERT_EQ(ids.size(), 1u);
  EXPECT_TRUE(has(added, "leases.llama added")) << added;
  EXPECT_TRUE(has(added, fmt::format("leases.llama: {} leased ({})", kUnit, ids[0]))) << added;
  EXPECT_EQ(units.watched, std::vector<std::string>{kUnit});

  leases = fmt::format(
      "[leases.llama]\nunit = \"{}\"\npools = [\"gpu\"]\nmemory_max = \"8GiB\"\n"
      "gpu_memory_max = \"20GiB\"\n",
      kUnit);
  json changed = call(9, 0, "reload", json::object());
  ASSERT_TRUE(changed["ok"]) << changed;
  EXPECT_TRUE(has(changed, "leases.llama.gpu_memory_max 16.0 GiB -> 20.0 GiB")) << changed;
  EXPECT_TRUE(has(changed, fmt::format("leases.llama: lease {} keeps what it was granted; the new "
                                       "declaration applies from {}'s next run",
                                       ids[0], kUnit)))
      << changed;
  EXPECT_EQ(json::parse(rows(ids[0])[0].body)["declared"]["gpu_memory_max"], 16 * GiB);

  leases.clear();
  json removed = call(9, 0, "reload", json::object());
  ASSERT_TRUE(removed["ok"]) << removed;
  EXPECT_TRUE(has(removed, fmt::format("leases.llama: {}'s live lease {} ends with its run; its "
                                       "later runs are not leased",
                                       kUnit, ids[0])))
      << removed;
  EXPECT_EQ(service->liveLeases(), 1u);
  unitRuns(kRun2);
  service->unitChanged(kUnit);
  EXPECT_EQ(leaseIds().size(), 1u);  // the next run is not leased
  EXPECT_EQ(service->liveLeases(), 0u);
}

}  // namespace
}  // namespace tally::testing
