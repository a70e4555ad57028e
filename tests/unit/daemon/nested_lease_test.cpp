// Child leases (attach "parent"): a Slurm job's lease with its steps inside.
// A child nests in a running lease's cgroup, holds no pool, is bounded by the
// smaller of its own and its parent's bound, is not counted again in the
// parent's figures, and ends with its parent if not before.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "daemon/service_fixture.h"

namespace tally {
namespace {

using namespace tally::testing;
using json = nlohmann::json;

class NestedLeaseTest : public ServiceBoundTest {
 protected:
  static constexpr const char* kJob = "/system.slice/slurmstepd.scope/job_7";
  static std::string step(int s) { return fmt::format("{}/step_{}/user", kJob, s); }

  // The job's cgroup and two steps' inside it, each step holding `stepGiB` of GTT.
  std::string attachJob(std::uint64_t boundGiB, std::uint64_t stepGiB = 2) {
    gpuWorkload(step(0), 5100, 31, stepGiB);
    gpuWorkload(step(1), 5101, 32, stepGiB);
    workloadCgroup(kJob, true);
    host.addCgroup(kJob, {});
    json r = call(1, 0, "attach",
                  {{"pools", {"gpu"}},
                   {"cgroup", kJob},
                   {"gpu_memory_max", boundGiB * GiB},
                   {"name", "job_7"},
                   {"no_wait", true}});
    EXPECT_TRUE(r["ok"]) << r;
    return r["result"].value("lease", "");
  }
  json attachStep(const std::string& parent, int s, std::optional<std::uint64_t> boundGiB,
                  std::uint32_t uid = 0) {
    json p = {{"cgroup", step(s)}, {"parent", parent}, {"name", fmt::format("7.{}", s)}};
    if (boundGiB) p["gpu_memory_max"] = *boundGiB * GiB;
    return call(2, uid, "attach", p);
  }
  json lease(const std::string& id) {
    json all = call(3, 0, "leases", json::object());
    for (const auto& l : all["result"]["leases"])
      if (l["lease"] == id) return l;
    return json();
  }
};

// A parent's children are budgeted (max_children_per_lease): 900 children
// under one lease made every listing too big for anyone to read.
TEST_F(NestedLeaseTest, AParentsChildrenAreBudgetedAndTheRefusalNamesTheBudget) {
  limits.maxChildrenPerLease = 1;
  reopen();
  std::string job = attachJob(8);
  ASSERT_FALSE(job.empty());
  json s0 = attachStep(job, 0, 2);
  ASSERT_TRUE(s0["ok"]) << s0;
  json s1 = attachStep(job, 1, 2);
  EXPECT_EQ(s1["error"]["code"], "busy") << s1;
  EXPECT_EQ(s1["error"]["message"], "lease " + job +
                                        " already has 1 child leases (max_children_per_lease); "
                                        "release one first");
  // Released, its place is free again.
  ASSERT_TRUE(call(2, 0, "release", {{"lease", s0["result"]["lease"]}})["ok"]);
  json again = attachStep(job, 1, 2);
  EXPECT_TRUE(again["ok"]) << again;
}

TEST_F(NestedLeaseTest, StepsNestInTheirJobHoldNoPoolAndAreBoundedByTheSmallerBound) {
  std::string job = attachJob(8);
  json s0 = attachStep(job, 0, 16);
  ASSERT_TRUE(s0["ok"]) << s0;
  json s1 = attachStep(job, 1, 2);
  ASSERT_TRUE(s1["ok"]) << s1;
  std::string a = s0["result"]["lease"], b = s1["result"]["lease"];
  EXPECT_EQ(s0["result"]["state"], "running") << "a child never waits in a queue";
  EXPECT_EQ(s0["result"]["pools"], json::array());
  EXPECT_EQ(s0["result"]["parent"], job);
  // 16 GiB asked, the job holds 8: the smaller bounds the step; 2 stays 2.
  EXPECT_EQ(lease(a)["declared"]["gpu_memory_max"], 8 * GiB);
  EXPECT_EQ(lease(b)["declared"]["gpu_memory_max"], 2 * GiB);
  // The pool holds the job once: its 8 GiB of 96, three leases running.
  json gpu, overview = service->overview(clock::realtimeNs());
  for (const auto& p : overview["pools"])
    if (p["pool"] == "gpu") gpu = p;
  EXPECT_EQ(gpu["holders"], json::array({job})) << gpu.dump(2);
  EXPECT_EQ(gpu["gpu_memory_declared"], 8 * GiB) << gpu.dump(2);
  // The job's meter holds both steps' memory; each step its own.
  service->sample();
  EXPECT_EQ(lease(job)["gpu"]["current_bytes"], 4 * GiB);
  EXPECT_EQ(lease(a)["gpu"]["current_bytes"], 2 * GiB);
  // A step's end asks once (lease, live): the step's view carries its job's.
  json live = call(4, 0, "lease", {{"lease", a}, {"live", true}});
  ASSERT_TRUE(live["ok"]) << live;
  EXPECT_EQ(live["result"]["gpu"]["current_bytes"], 2 * GiB);
  EXPECT_EQ(live["result"]["parent_view"]["lease"], job) << live.dump(2);
  EXPECT_EQ(live["result"]["parent_view"]["gpu"]["current_bytes"], 4 * GiB);
  EXPECT_EQ(live["result"]["parent_view"]["declared"]["gpu_memory_max"], 8 * GiB);
  EXPECT_FALSE(call(5, 0, "lease", {{"lease", a}})["result"].contains("parent_view"))
      << "the whole view (lease show) stays as it was";
  EXPECT_FALSE(
      call(6, 0, "lease", {{"lease", job}, {"live", true}})["result"].contains("parent_view"));
  // The granted row names the parent: a restarted daemon rebuilds the tree.
  json granted = json::parse(rows(a).front().body);
  EXPECT_EQ(granted["parent"], job);
  EXPECT_FALSE(granted.contains("pools") && !granted["pools"].empty());
}

TEST_F(NestedLeaseTest, AStepThatDeclaredNoBoundIsHeldToItsJobs) {
  std::string job = attachJob(8);
  json s = attachStep(job, 0, std::nullopt);
  ASSERT_TRUE(s["ok"]) << s;
  EXPECT_EQ(lease(s["result"]["lease"])["declared"]["gpu_memory_max"], 8 * GiB);
}

TEST_F(NestedLeaseTest, AChildIsRefusedWithTheReasonWhenItCannotNestThere) {
  std::string job = attachJob(8);
  auto refusal = [&](const json& r) {
    EXPECT_FALSE(r["ok"]) << r;
    return r["error"]["message"].get<std::string>();
  };
  // Not inside the parent's cgroup.
  gpuWorkload("/system.slice/other.service", 5200, 41, 1);
  json outside = call(2, 0, "attach", {{"cgroup", "/system.slice/other.service"}, {"parent", job}});
  EXPECT_NE(refusal(outside).find("is not inside lease " + job), std::string::npos);
  // The parent's own cgroup is not a child of it.
  json same = call(2, 0, "attach", {{"cgroup", kJob}, {"parent", job}});
  EXPECT_EQ(same["error"]["code"], "conflict") << same;
  // No such parent.
  json none = call(2, 0, "attach", {{"cgroup", step(0)}, {"parent", "000000000000"}});
  EXPECT_EQ(none["error"]["code"], "not-found") << none;
  // Another user's job.
  json theirs = attachStep(job, 0, 1, 1000);
  EXPECT_EQ(theirs["error"]["code"], "forbidden") << theirs;
  // One level: a child's child is refused, naming where to attach.
  json s0 = attachStep(job, 0, 4);
  ASSERT_TRUE(s0["ok"]) << s0;
  gpuWorkload(step(0) + "/task_0", 5102, 33, 1);
  json deeper =
      call(2, 0, "attach", {{"cgroup", step(0) + "/task_0"}, {"parent", s0["result"]["lease"]}});
  EXPECT_NE(refusal(deeper).find("tally nests one level; attach under " + job), std::string::npos);
  // A child names no pool: its parent's count it.
  json pooled = call(2, 0, "attach", {{"cgroup", step(1)}, {"parent", job}, {"pools", {"gpu"}}});
  EXPECT_EQ(pooled["error"]["code"], "invalid-params") << pooled;
  // Without "parent" a cgroup inside a lease's is still one workload, one lease.
  json plain =
      call(2, 0, "attach", {{"cgroup", step(1)}, {"pools", {"gpu"}}, {"gpu_memory_max", GiB}});
  EXPECT_EQ(plain["error"]["code"], "conflict") << plain;
}

TEST_F(NestedLeaseTest, AttachOrJoinAnswersWithTheLeaseThatIsThere) {
  std::string job = attachJob(8);
  json again = call(4, 0, "attach",
                    {{"pools", {"gpu"}},
                     {"cgroup", kJob},
                     {"gpu_memory_max", 8 * GiB},
                     {"join", true},
                     {"no_wait", true}});
  ASSERT_TRUE(again["ok"]) << again;
  EXPECT_EQ(again["result"]["lease"], job);
  EXPECT_EQ(again["result"]["joined"], true);
  EXPECT_EQ(kinds(job), (std::vector<std::string>{"granted", "adopted"})) << "no second grant";
  // Someone else's lease of it is not theirs to join.
  json other =
      call(5, 1000, "attach",
           {{"pools", {"gpu"}}, {"cgroup", kJob}, {"gpu_memory_max", GiB}, {"join", true}});
  EXPECT_FALSE(other["ok"]) << other;
}

TEST_F(NestedLeaseTest, ChildrenEndWithTheirParentAndBeforeIt) {
  std::string job = attachJob(8);
  std::string s0 = attachStep(job, 0, std::nullopt)["result"]["lease"];
  std::string s1 = attachStep(job, 1, std::nullopt)["result"]["lease"];
  // Step 0 ends on its own.
  writeFile(host.cgroupRoot() + step(0) + "/cgroup.events", "populated 0\nfrozen 0\n");
  service->cgroupChanged(s0);
  EXPECT_EQ(kinds(s0).back(), "outcome");
  EXPECT_NE(lease(job), json()) << "the job goes on";
  // The job is released while step 1 runs: step 1 is released with it, first.
  json rel = call(1, 0, "release", {{"lease", job}});
  ASSERT_TRUE(rel["ok"]) << rel;
  ASSERT_EQ(kinds(s1).back(), "outcome");
  json out = json::parse(rows(s1).back().body);
  EXPECT_EQ(out["outcome"]["class"], "released");
  EXPECT_NE(out["outcome"]["summary"].get<std::string>().find("released with its parent lease " +
                                                              job + " (job_7)"),
            std::string::npos)
      << out.dump(2);
  EXPECT_LT(rows(s1).back().seq, rows(job).back().seq) << "the child's row comes first";
  EXPECT_EQ(service->liveLeases(), 0u);
}

// Over the job's bound, the daemon kills the steps' cgroups, never the job's
// (it holds slurmstepd), and each step's outcome names its parent's kill.
TEST_F(NestedLeaseTest, AParentOverItsBoundKillsItsChildrenNotItself) {
  gpuWorkload(step(0), 5100, 31, 2);
  gpuWorkload(step(1), 5101, 32, 2);
  workloadCgroup(kJob, true);
  host.addCgroup(kJob, {});
  json r = call(1, 0, "attach",
                {{"pools", {"gpu"}},
                 {"cgroup", kJob},
                 {"gpu_memory_max", 3 * GiB},
                 {"gpu_memory_action", "kill"},
                 {"force", true},
                 {"name", "job_7"}});
  ASSERT_TRUE(r["ok"]) << r;
  std::string job = r["result"]["lease"];
  std::string s0 = attachStep(job, 0, std::nullopt)["result"]["lease"];
  std::string s1 = attachStep(job, 1, std::nullopt)["result"]["lease"];
  for (int i = 0; i < 3; ++i) service->sample();  // 4 GiB over 3: two samples, then the kill
  EXPECT_TRUE(killed(step(0)));
  EXPECT_TRUE(killed(step(1)));
  EXPECT_NE(::access((host.cgroupRoot() + kJob + "/cgroup.kill").c_str(), F_OK), 0)
      << "never the job's cgroup";
  // Its live view says the kill (the plugin's step and job lines read it as the tasks die).
  json kill = lease(job)["gpu_bound"]["kill"];
  EXPECT_EQ(kill["kind"], "gpu-memory-kill") << lease(job).dump(2);
  EXPECT_EQ(kill["bytes"], 4 * GiB);
  EXPECT_EQ(kill["limit"], 3 * GiB);
  writeFile(host.cgroupRoot() + step(0) + "/cgroup.events", "populated 0\nfrozen 0\n");
  service->cgroupChanged(s0);
  ASSERT_EQ(kinds(s0).back(), "outcome");
  json out = json::parse(rows(s0).back().body);
  EXPECT_EQ(out["outcome"]["class"], "killed-by-tally") << out.dump(2);
  EXPECT_NE(out["outcome"]["summary"].get<std::string>().find("killed with its parent lease " +
                                                              job + " (job_7)"),
            std::string::npos)
      << out.dump(2);
}

// A placed lease (a Slurm job's, placed against its GRES) never kills its
// own cgroup, which holds slurmstepd: with no child lease to take, the kill
// is not done and said once, however many samples stay over; a child
// attached later is what the next kill takes.
TEST_F(NestedLeaseTest, APlacedLeaseOverItsBoundWithNoChildKillsNothingAndSaysSoOnce) {
  gpuWorkload(kJob + std::string("/step_extern/user"), 5100, 31, 4);
  workloadCgroup(kJob, true);
  host.addCgroup(kJob, {});
  json r = call(1, 0, "attach",
                {{"pools", {"gpu"}},
                 {"cgroup", kJob},
                 {"gpu_memory_max", 3 * GiB},
                 {"gpu_memory_action", "kill"},
                 {"force", true},
                 {"no_wait", true},
                 {"placed", true},
                 {"name", "slurm-7"}});
  ASSERT_TRUE(r["ok"]) << r;
  std::string job = r["result"]["lease"];
  for (int i = 0; i < 6; ++i) service->sample();
  EXPECT_NE(::access((host.cgroupRoot() + kJob + "/cgroup.kill").c_str(), F_OK), 0)
      << "a placed lease's own cgroup was killed";
  auto skipped = [&] {
    int n = 0;
    for (const auto& note : journal.notes)
      n += note.message.find("lease " + job +
                             " (slurm-7): could not kill it over its "
                             "gpu_memory_max: it was placed by the site's scheduler") == 0;
    return n;
  };
  EXPECT_EQ(skipped(), 1) << "said once, not at every sample over";
  // Said where operators look: one gpu-memory-kill-failed row, the journal
  // at LOG_ERR with its event field, and the counter the alert reads.
  int failedRows = 0;
  for (const auto& row : rows(job))
    failedRows += row.kind == "gpu-bound" &&
                  json::parse(row.body).value("kind", "") == "gpu-memory-kill-failed";
  EXPECT_EQ(failedRows, 1);
  const FakeJournal::Note* said = nullptr;
  for (const auto& n : journal.notes)
    for (const auto& [k, v] : n.fields)
      if (k == "TALLY_EVENT" && v == "gpu-memory-kill-failed") said = &n;
  ASSERT_NE(said, nullptr);
  EXPECT_EQ(said->priority, 3);
  std::string text = call(4, 1000, "metrics", json::object())["result"]["text"];
  EXPECT_NE(text.find("tally_gpu_bound_events_total{kind=\"gpu-memory-kill-failed\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(lease(job)["state"], "running");
  // The user part as a child lease: the next kill takes it, and only it.
  json child = call(2, 0, "attach",
                    {{"cgroup", kJob + std::string("/step_extern/user")},
                     {"parent", job},
                     {"force", true},
                     {"name", "slurm-7.extern"}});
  ASSERT_TRUE(child["ok"]) << child;
  for (int i = 0; i < 3; ++i) service->sample();
  EXPECT_TRUE(killed(kJob + std::string("/step_extern/user")));
  EXPECT_NE(::access((host.cgroupRoot() + kJob + "/cgroup.kill").c_str(), F_OK), 0);
  EXPECT_EQ(skipped(), 1);
}

TEST_F(NestedLeaseTest, GpuMemoryOutsideLeasesCountsAChildOnce) {
  std::string job = attachJob(8);
  ASSERT_TRUE(attachStep(job, 0, std::nullopt)["ok"]);
  service->sample();
  json o = service->overview(clock::realtimeNs());
  // The device says 20 GiB GTT used; the job (both steps) holds 4: 16 outside.
  EXPECT_EQ(o["outside_leases"]["gtt"]["bytes"], 16 * GiB) << o.dump(2);
}

// keep_when_empty: a Slurm 26.05 extern step's user part holds no process
// until pam_slurm_adopt puts an ssh session there. Such a child is placed
// empty, lives through emptying, is killed by its parent's bound only while
// it holds processes, ends with its parent or when its cgroup is removed, and
// a restarted daemon re-adopts it empty. Without the flag an empty cgroup is
// still refused.
TEST_F(NestedLeaseTest, AChildKeptWhenEmptyLivesUntilItsParentEndsAndIsKilledOnlyWithProcesses) {
  gpuWorkload(step(0), 5100, 31, 4);  // the job's step, no lease of its own
  workloadCgroup(kJob, true);
  host.addCgroup(kJob, {});
  json r = call(1, 0, "attach",
                {{"pools", {"gpu"}},
                 {"cgroup", kJob},
                 {"gpu_memory_max", 3 * GiB},
                 {"gpu_memory_action", "kill"},
                 {"force", true},
                 {"no_wait", true},
                 {"placed", true},
                 {"name", "slurm-7"}});
  ASSERT_TRUE(r["ok"]) << r;
  std::string job = r["result"]["lease"];
  const std::string ext = std::string(kJob) + "/step_extern/user";
  workloadCgroup(ext, false);
  json refused = call(2, 0, "attach", {{"cgroup", ext}, {"parent", job}, {"name", "7.extern"}});
  EXPECT_NE(refused.dump().find("has no processes"), std::string::npos) << refused;
  json noParent =
      call(2, 0, "attach", {{"cgroup", ext}, {"pools", {"gpu"}}, {"keep_when_empty", true}});
  EXPECT_EQ(noParent["error"]["code"], "invalid-params") << noParent;
  json kept = call(
      2, 0, "attach",
      {{"cgroup", ext}, {"parent", job}, {"name", "slurm-7.extern"}, {"keep_when_empty", true}});
  ASSERT_TRUE(kept["ok"]) << kept;
  std::string e = kept["result"]["lease"];
  EXPECT_EQ(json::parse(rows(e).front().body).value("keep_when_empty", false), true)
      << rows(e).front().body;
  service->cgroupChanged(e);
  // The job is over its bound, and its only child is empty: no workload to
  // kill (said once), the child is not killed, and it stays.
  for (int i = 0; i < 6; ++i) service->sample();
  EXPECT_FALSE(killed(ext)) << "an empty child is no workload to kill";
  int skipped = 0;
  for (const auto& note : journal.notes)
    skipped += note.message.find("no child lease holds a workload to kill") != std::string::npos;
  EXPECT_EQ(skipped, 1);
  EXPECT_NE(lease(e), json()) << "empty, and kept";
  // An ssh session arrives there: the next kill takes it, never the job's cgroup.
  gpuWorkload(ext, 5300, 51, 1);
  service->cgroupChanged(e);
  for (int i = 0; i < 3; ++i) service->sample();
  EXPECT_TRUE(killed(ext));
  EXPECT_NE(::access((host.cgroupRoot() + kJob + "/cgroup.kill").c_str(), F_OK), 0);
  // It empties: still kept, until the job ends.
  writeFile(host.cgroupRoot() + ext + "/cgroup.events", "populated 0\nfrozen 0\n");
  service->cgroupChanged(e);
  service->sample();
  EXPECT_NE(lease(e), json()) << "emptied, and kept";
  // A restart re-adopts it empty, not as "emptied while the daemon was down".
  reopen();
  auto log = service->recover();
  ASSERT_TRUE(log) << log.error().message;
  EXPECT_NE(lease(e), json()) << ::testing::PrintToString(*log);
  // Its cgroup removed: it ends, and the job goes on.
  std::filesystem::remove_all(host.cgroupRoot() + ext);
  service->cgroupChanged(e);
  EXPECT_EQ(lease(e), json());
  EXPECT_EQ(kinds(e).back(), "outcome");
  EXPECT_NE(lease(job), json()) << "the job goes on";
}

// Kept empty, it ends with its parent, first.
TEST_F(NestedLeaseTest, AChildKeptWhenEmptyEndsWithItsParent) {
  std::string job = attachJob(8);
  const std::string ext = std::string(kJob) + "/step_extern/user";
  workloadCgroup(ext, false);
  json kept = call(2, 0, "attach", {{"cgroup", ext}, {"parent", job}, {"keep_when_empty", true}});
  ASSERT_TRUE(kept["ok"]) << kept;
  std::string e = kept["result"]["lease"];
  ASSERT_TRUE(call(1, 0, "release", {{"lease", job}})["ok"]);
  ASSERT_EQ(kinds(e).back(), "outcome");
  EXPECT_LT(rows(e).back().seq, rows(job).back().seq);
  EXPECT_EQ(service->liveLeases(), 0u);
}

// A parent that is not placed, over its bound with only an empty kept child,
// still never kills its own cgroup (it has children); said as a failed kill.
// Its cgroup then empties while the daemon is down: at the restart the
// parent is lost, and its kept child ends with it rather than waiting for a
// parent that never comes.
TEST_F(NestedLeaseTest,
       AParentWithOnlyEmptyChildrenKillsNothingAndItsChildEndsWithItAcrossARestart) {
  gpuWorkload(step(0), 5100, 31, 4);  // no lease of its own
  workloadCgroup(kJob, true);
  host.addCgroup(kJob, {});
  json r = call(1, 0, "attach",
                {{"pools", {"gpu"}},
                 {"cgroup", kJob},
                 {"gpu_memory_max", 3 * GiB},
                 {"gpu_memory_action", "kill"},
                 {"force", true},
                 {"name", "job_7"}});
  ASSERT_TRUE(r["ok"]) << r;
  std::string job = r["result"]["lease"];
  const std::string ext = std::string(kJob) + "/step_extern/user";
  workloadCgroup(ext, false);
  json kept = call(2, 0, "attach", {{"cgroup", ext}, {"parent", job}, {"keep_when_empty", true}});
  ASSERT_TRUE(kept["ok"]) << kept;
  std::string e = kept["result"]["lease"];
  for (int i = 0; i < 4; ++i) service->sample();
  EXPECT_NE(::access((host.cgroupRoot() + kJob + "/cgroup.kill").c_str(), F_OK), 0)
      << "a parent with children never kills its own cgroup";
  EXPECT_FALSE(killed(ext));
  int said = 0;
  for (const auto& n : journal.notes)
    said += n.message.find("its child leases hold no process to kill") != std::string::npos;
  EXPECT_EQ(said, 1);
  // Down; the job's cgroup empties meanwhile; up again.
  writeFile(host.cgroupRoot() + kJob + "/cgroup.events", "populated 0\nfrozen 0\n");
  reopen();
  auto log = service->recover();
  ASSERT_TRUE(log) << log.error().message;
  EXPECT_EQ(lease(job), json());
  EXPECT_EQ(lease(e), json()) << ::testing::PrintToString(*log);
  ASSERT_EQ(kinds(e).back(), "lost");
  EXPECT_NE(
      rows(e).back().body.find("its parent lease " + job + " ended while the daemon was down"),
      std::string::npos)
      << rows(e).back().body;
}

}  // namespace
}  // namespace tally
