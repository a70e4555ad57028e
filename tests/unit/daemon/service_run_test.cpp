// The lease service's run leases (started, completed, lost, released) and its
// recovery of live leases after a restart.
#include "daemon/service_fixture.h"

namespace tally {
namespace {

using namespace tally::testing;
using json = nlohmann::json;
constexpr std::uint64_t GiB = 1ULL << 30;

TEST_F(ServiceTest, RunLeaseStartedAndCompletedExactlyOnce) {
  std::string id =
      call(1, 1000, "acquire", {{"pools", {"one"}}, {"name", "job"}})["result"]["lease"];
  std::string slice = "/tally.slice/tally-" + id + ".slice";
  std::string scope = slice + "/tally-" + id + ".scope";
  workloadCgroup(slice, true, 1000);
  workloadCgroup(scope, true, 1000);
  // Not the lease's cgroup, or not the caller's: refused.
  workloadCgroup("/other.scope", true, 1000);
  EXPECT_EQ(call(1, 1000, "started", {{"lease", id}, {"cgroup", "/other.scope"}})["error"]["code"],
            "forbidden");
  json s = call(1, 1000, "started",
                {{"lease", id},
                 {"unit", "tally-" + id + ".scope"},
                 {"cgroup", scope},
                 {"counters_cgroup", slice}});
  ASSERT_TRUE(s["ok"]) << s;
  EXPECT_EQ(watches.paths[id], host.cgroupRoot() + slice + "/cgroup.events");
  json record = {{"schema", 1},
                 {"lease", {{"id", id}, {"name", "job"}}},
                 {"outcome", {{"class", "exited"}, {"tally_exit_status", 0}}}};
  EXPECT_EQ(
      call(1, 1000, "complete",
           {{"lease", id}, {"record", {{"lease", {{"id", "someone-else"}}}}}})["error"]["code"],
      "invalid-params");
  json c = call(1, 1000, "complete", {{"lease", id}, {"record", record}});
  ASSERT_TRUE(c["ok"]) << c;
  EXPECT_EQ(call(1, 1000, "complete", {{"lease", id}, {"record", record}})["error"]["code"],
            "not-found");
  EXPECT_EQ(kinds(id), (std::vector<std::string>{"granted", "started", "outcome"}));
  json stored = json::parse(rows(id).back().body);
  EXPECT_EQ(stored["daemon"]["memory_peak_bytes"],
            2 * GiB);  // read by the daemon from the slice itself
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
  std::string a = call(1, 0, "attach",
                       {{"pools", {"gpu"}},
                        {"cgroup", "/system.slice/a.service"},
                        {"gpu_memory_max", GiB}})["result"]["lease"];
  std::string b = call(1, 0, "attach",
                       {{"pools", {"gpu"}},
                        {"cgroup", "/system.slice/b.service"},
                        {"gpu_memory_max", GiB}})["result"]["lease"];
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
  EXPECT_EQ(lostB["memory"]["sampled"]["peak_unknown"],
            "not sampled since the daemon restarted; see ledger_samples");
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
  EXPECT_NE(
      json::parse(rows(a).back().body)["outcome"]["summary"].get<std::string>().find("re-created"),
      std::string::npos);
  // The run lease: its client resumes after the restart.
  EXPECT_TRUE(call(3, 0, "resume", {{"lease", run}})["ok"]);
  EXPECT_TRUE(ledgerDb->verify()->problems.empty());
}

// The Slurm plugin waits at a step's end with the cgroup kept for the
// outcome: a daemon restarted then finds the cgroup empty. Its attacher still
// reports how the tasks ended, so the lease is re-adopted and the outcome
// waits for the word (or the deadline) as before the restart; an attach lease
// nobody reports for is lost, as before.
TEST_F(ServiceTest, AnEmptiedLeaseWhoseAttacherReportsIsWaitedForAcrossARestart) {
  clockStep = 0;
  const std::string stepCg = "/system.slice/slurmstepd.scope/job_11/step_0/user";
  workloadCgroup(stepCg, true);
  workloadCgroup("/system.slice/quiet.service", true);
  json r = call(
      1, 0, "attach",
      {{"pools", {"gpu"}}, {"cgroup", stepCg}, {"gpu_memory_max", GiB}, {"reports_exit", true}});
  ASSERT_TRUE(r["ok"]) << r;
  std::string step = r["result"]["lease"];
  EXPECT_EQ(json::parse(rows(step).front().body)["reports_exit"], true)
      << "the promise is in the granted row, for a restarted daemon";
  std::string quiet = call(1, 0, "attach",
                           {{"pools", {"gpu"}},
                            {"cgroup", "/system.slice/quiet.service"},
                            {"gpu_memory_max", GiB}})["result"]["lease"];
  service.reset();  // kill -9; both empty while no daemon runs
  for (const std::string& cg : {stepCg, std::string("/system.slice/quiet.service")})
    writeFile(host.cgroupRoot() + cg + "/cgroup.events", "populated 0\nfrozen 0\n");
  reopen();
  ASSERT_TRUE(service->recover());
  EXPECT_EQ(kinds(quiet).back(), "lost");
  EXPECT_EQ(kinds(step), (std::vector<std::string>{"granted", "adopted", "readopted"}))
      << "waits for its attacher's word";
  ASSERT_TRUE(call(2, 0, "exited", {{"lease", step}, {"exit_code", 3}})["ok"]);
  ASSERT_EQ(kinds(step).back(), "outcome");
  json outcome = json::parse(rows(step).back().body);
  EXPECT_EQ(outcome["outcome"]["exit_code"], 3) << outcome.dump(2);
  EXPECT_EQ(outcome["daemon"]["readopted_after_restart"], true);
  // The word never comes after a restart: the deadline ends it, as it would have.
  const std::string silentCg = "/system.slice/slurmstepd.scope/job_12/step_0/user";
  workloadCgroup(silentCg, true);
  std::string silent = call(1, 0, "attach",
                            {{"pools", {"gpu"}},
                             {"cgroup", silentCg},
                             {"gpu_memory_max", GiB},
                             {"reports_exit", true}})["result"]["lease"];
  service.reset();
  writeFile(host.cgroupRoot() + silentCg + "/cgroup.events", "populated 0\nfrozen 0\n");
  reopen();
  ASSERT_TRUE(service->recover());
  service->tick();
  EXPECT_EQ(kinds(silent).back(), "readopted");
  clockUs += rpc::api::kExitReportWaitUs;
  service->tick();
  EXPECT_EQ(kinds(silent).back(), "outcome");
}

}  // namespace
}  // namespace tally

namespace tally::testing {
namespace {

// tally lease release on a running run lease (a detached job's too): the
// daemon's SIGTERM ends the workload, and the outcome names who stopped it.
TEST_F(ServiceTest, AReleasedRunLeasesOutcomeSaysTheReleaseStoppedIt) {
  std::string id = call(1, 1000, "acquire", {{"pools", {"one"}}})["result"]["lease"];
  std::string slice = "/tally.slice/tally-" + id + ".slice";
  std::string scope = slice + "/tally-" + id + ".scope";
  workloadCgroup(slice, true, 1000);
  workloadCgroup(scope, true, 1000);
  ASSERT_TRUE(call(1, 1000, "started",
                   {{"lease", id}, {"cgroup", scope}, {"counters_cgroup", slice}})["ok"]);
  EXPECT_EQ(call(2, 1000, "release", {{"lease", id}})["result"]["state"], "stopping");
  json record = {
      {"schema", 1},
      {"lease", {{"id", id}}},
      {"outcome",
       {{"class", "killed-by-signal"}, {"signal", 15}, {"summary", "killed by SIGTERM"}}}};
  ASSERT_TRUE(call(1, 1000, "complete", {{"lease", id}, {"record", record}})["ok"]);
  json stored = json::parse(rows(id).back().body);
  EXPECT_EQ(stored["outcome"]["class"], "stopped");
  EXPECT_EQ(stored["outcome"]["summary"], "stopped by tally lease release: killed by SIGTERM");
  EXPECT_EQ(stored["client"]["outcome"]["class"], "killed-by-signal");  // its word, kept
  // Not released: the wait status the client reaped names it.
  std::string other = call(1, 1000, "acquire", {{"pools", {"one"}}})["result"]["lease"];
  std::string slice2 = "/tally.slice/tally-" + other + ".slice";
  workloadCgroup(slice2, true, 1000);
  workloadCgroup(slice2 + "/tally-" + other + ".scope", true, 1000);
  ASSERT_TRUE(call(1, 1000, "started",
                   {{"lease", other},
                    {"cgroup", slice2 + "/tally-" + other + ".scope"},
                    {"counters_cgroup", slice2}})["ok"]);
  record["lease"]["id"] = other;
  ASSERT_TRUE(call(1, 1000, "complete", {{"lease", other}, {"record", record}})["ok"]);
  EXPECT_EQ(json::parse(rows(other).back().body)["outcome"]["class"], "killed-by-signal");
}

}  // namespace
}  // namespace tally::testing
