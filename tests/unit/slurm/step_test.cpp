// One Slurm step as one lease: which steps are leased, with what, on which
// cgroup, and what a misconfiguration says.
#include "slurm/step.h"

#include <gtest/gtest.h>

namespace tally::slurm {
namespace {

constexpr std::uint64_t MiB = 1ULL << 20;

StepFacts facts() {
  StepFacts f;
  f.jobId = 42;
  f.stepId = 0;
  f.user = "alice";
  f.partition = "gpu";
  f.cgroup = "/system.slice/node1_slurmstepd.scope/job_42/step_0/user";
  return f;
}

TEST(SlurmStep, TheGresBoundsTheStepWhenNoFlagDoes) {
  StepFacts f = facts();
  f.gresBytes = 64 * MiB;
  auto r = stepRequest(PluginArgs{}, StepOptions{}, f);
  ASSERT_TRUE(r) << r.error().message;
  const auto& d = r->declared;
  EXPECT_EQ(d.declaration.gpuMemoryMax, 64 * MiB);
  EXPECT_EQ(d.declaration.gpuMemoryHigh, std::nullopt);
  EXPECT_EQ(d.declaration.memoryMax, std::nullopt)
      << "host memory is Slurm's to bound, never the plugin's";
  EXPECT_EQ(d.pools, std::vector<std::string>{"slurm"});
  EXPECT_EQ(d.declaration.name, "slurm-42.0");
  EXPECT_EQ(r->target.cgroup, f.cgroup);
  EXPECT_EQ(d.declaration.attributes.at("slurm_job_id"), "42");
  EXPECT_EQ(d.declaration.attributes.at("slurm_step_id"), "0");
  EXPECT_EQ(d.declaration.attributes.at("slurm_user"), "alice");
  EXPECT_EQ(d.declaration.attributes.at("slurm_partition"), "gpu");
  EXPECT_EQ(d.declaration.attributes.count("slurm_account"), 0u) << "none given: none made up";
  EXPECT_EQ(d.declaration.attributes.count("slurm_array_job_id"), 0u);
  // What goes on the wire is what the daemon's decoder accepts.
  auto back = rpc::api::decodeAttach(rpc::api::encode(*r));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->declared.declaration.gpuMemoryMax, 64 * MiB);
  EXPECT_EQ(back->target.cgroup, f.cgroup);
}

// An array task's step carries the array's ids and the job's account, so a
// sweep's leases are found by the array's id (journalctl TALLY_ATTR_...).
TEST(SlurmStep, AnArrayTaskCarriesTheArraysIdsAndTheAccount) {
  StepFacts f = facts();
  f.gresBytes = 64 * MiB;
  f.account = "ml-research";
  f.arrayJobId = 40;
  f.arrayTaskId = 2;
  auto r = stepRequest(PluginArgs{}, StepOptions{}, f);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->declared.declaration.attributes.at("slurm_account"), "ml-research");
  EXPECT_EQ(r->declared.declaration.attributes.at("slurm_array_job_id"), "40");
  EXPECT_EQ(r->declared.declaration.attributes.at("slurm_array_task_id"), "2");
  EXPECT_EQ(r->declared.declaration.attributes.at("slurm_job_id"), "42");
  EXPECT_EQ(r->declared.declaration.attributes.count("slurm_het_job_id"), 0u)
      << "not a heterogeneous job";
}

// A heterogeneous job's component carries its leader's id and its offset
// (from the job's record: no SPANK item has them), so sacct's 4244+1 is found.
TEST(SlurmStep, AHeterogeneousJobsComponentCarriesItsLeaderAndOffset) {
  StepFacts f = facts();
  f.gresBytes = 64 * MiB;
  f.het = HetJob{41, 1};
  for (bool step : {true, false}) {
    auto r = step ? stepRequest(PluginArgs{}, StepOptions{}, f)
                  : jobRequest(PluginArgs{}, StepOptions{}, f);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->declared.declaration.attributes.at("slurm_het_job_id"), "41");
    EXPECT_EQ(r->declared.declaration.attributes.at("slurm_het_job_offset"), "1");
    EXPECT_EQ(r->declared.declaration.attributes.at("slurm_job_id"), "42")
        << "the component's own id";
  }
}

// At the job's end on a node, one line for Slurm's AdminComment from its
// job lease's view; each node replaces only its own line.
TEST(SlurmStep, TheJobsSummaryIsOneLinePerNodeInAdminComment) {
  nlohmann::json view = {{"lease", "0cf38ef3790c"},
                         {"declared", {{"memory_max", nullptr}, {"gpu_memory_max", 768 * MiB}}},
                         {"gpu",
                          {{"current_bytes", 0u},
                           {"peak_bytes", 512 * MiB},
                           {"allocations_refused", 2u},
                           {"refused_bytes", 1024 * MiB}}}};
  auto job = stepBoundFromLease(view);
  ASSERT_TRUE(job) << job.error().message;
  EXPECT_EQ(job->peak, 512 * MiB);
  EXPECT_EQ(jobSummary("node1", *job),
            "tally node1: GPU peak 512.0 MiB of 768.0 MiB; 2 GPU allocations refused in the "
            "kernel (1.0 GiB asked)");
  view["gpu"] = {{"current_bytes", nullptr}, {"peak_bytes", nullptr}};
  auto unknown = stepBoundFromLease(view);
  ASSERT_TRUE(unknown);
  EXPECT_EQ(jobSummary("node1", *unknown), "tally node1: GPU peak unknown of 768.0 MiB")
      << "never 0";
  view["gpu"] = {{"peak_bytes", "lots"}};
  EXPECT_FALSE(stepBoundFromLease(view));

  EXPECT_EQ(mergeAdminComment("", "node1", "tally node1: GPU peak 1.0 GiB"),
            "tally node1: GPU peak 1.0 GiB");
  EXPECT_EQ(
      mergeAdminComment("tally node1: GPU peak 1.0 GiB", "node2", "tally node2: GPU peak 2.0 GiB"),
      "tally node1: GPU peak 1.0 GiB | tally node2: GPU peak 2.0 GiB");
  EXPECT_EQ(mergeAdminComment("requeued by ops | tally node1: GPU peak 1.0 GiB | tally node10: x",
                              "node1", "tally node1: GPU peak 3.0 GiB"),
            "requeued by ops | tally node10: x | tally node1: GPU peak 3.0 GiB")
      << "its own line replaced; node10's and the operator's kept";
}

// What the step's stderr gets as its tasks end, beside Slurm's own lines:
// the kernel's refusal count and the kill, read from the daemon's view of
// the lease.
TEST(SlurmStep, TheStepsEndLinesSayWhatTheBoundDid) {
  nlohmann::json view = {
      {"lease", "b7ced5edfc02"},
      {"declared", {{"memory_max", nullptr}, {"gpu_memory_max", 64 * MiB}}},
      {"gpu", {{"current_bytes", 0u}, {"allocations_refused", 3u}, {"refused_bytes", 384 * MiB}}},
      {"ledger",
       {{{"seq", 1u}, {"kind", "granted"}, {"body", {{"name", "slurm-42.0"}}}},
        {{"seq", 2u},
         {"kind", "gpu-bound"},
         {"body",
          {{"at_ns", 5u}, {"kind", "gpu-memory-high"}, {"bytes", 40 * MiB}, {"limit", 32 * MiB}}}},
        {{"seq", 3u},
         {"kind", "gpu-bound"},
         {"body",
          {{"at_ns", 9u},
           {"kind", "gpu-memory-kill"},
           {"bytes", 130 * MiB},
           {"limit", 64 * MiB},
           {"samples", 2u},
           {"summary", "killed by tally: GPU memory 130.0 MiB over gpu_memory_max 64.0 MiB"}}}}}}};
  auto b = stepBoundFromLease(view);
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_EQ(boundLines(42, 0, *b),
            (std::vector<std::string>{
                "tally: StepId=42.0: 3 GPU allocations refused in the kernel at gpu_memory_max "
                "64.0 MiB (384.0 MiB asked)",
                "tally: StepId=42.0 killed: GPU memory 130.0 MiB over gpu_memory_max 64.0 MiB"}));
  // Ended before the question came: the granted and outcome rows say it.
  nlohmann::json ended = {
      {"lease", "5f58ac00d1e4"},
      {"state", "ended"},
      {"ledger",
       {{{"kind", "granted"}, {"body", {{"declared", {{"gpu_memory_max", 64 * MiB}}}}}},
        {{"kind", "gpu-bound"},
         {"body", {{"at_ns", 3u}, {"kind", "refused"}, {"bytes", 128 * MiB}, {"samples", 1u}}}},
        {{"kind", "outcome"},
         {"body",
          {{"gpu",
            {{"kernel_charge", {{"allocations_refused", 1u}, {"refused_bytes", 128 * MiB}}}}}}}}}}};
  auto e = stepBoundFromLease(ended);
  ASSERT_TRUE(e) << e.error().message;
  EXPECT_EQ(boundLines(42, 1, *e),
            (std::vector<std::string>{"tally: StepId=42.1: 1 GPU allocation refused in the "
                                      "kernel at gpu_memory_max 64.0 MiB (128.0 MiB asked)"}));
  // Nothing refused, nothing killed (a lease not charged in the kernel has
  // no counters at all): nothing said.
  nlohmann::json quiet = {{"declared", {{"gpu_memory_max", 64 * MiB}}},
                          {"gpu", {{"source", "drm-fdinfo"}}}};
  auto q = stepBoundFromLease(quiet);
  ASSERT_TRUE(q) << q.error().message;
  EXPECT_TRUE(boundLines(7, kBatchStep, *q).empty());
  StepBound one;
  one.refused = 1;
  one.refusedBytes = 128 * MiB;
  one.max = 64 * MiB;
  EXPECT_EQ(boundLines(7, kBatchStep, one),
            (std::vector<std::string>{"tally: StepId=7.batch: 1 GPU allocation refused in the "
                                      "kernel at gpu_memory_max 64.0 MiB (128.0 MiB asked)"}));
  // A reply that lies about its types is refused, never read as zero.
  for (const char* bad :
       {R"({"gpu": {"allocations_refused": -1}})", R"({"gpu": {"refused_bytes": "lots"}})",
        R"({"declared": {"gpu_memory_max": 1.5}})",
        R"({"ledger": [{"kind": "gpu-bound", "body": {"kind": 7}}]})", R"([])"}) {
    EXPECT_FALSE(stepBoundFromLease(nlohmann::json::parse(bad))) << bad;
  }
}

// A kill at the job's bound takes the job's steps (never its cgroup, which
// holds slurmstepd): each step's stderr says it died with its job, and the
// job's AdminComment line says its steps were killed.
TEST(SlurmStep, AKillAtTheJobsBoundIsSaidOnTheStepAndInTheJobsLine) {
  nlohmann::json killRow = {
      {"kind", "gpu-bound"},
      {"body",
       {{"at_ns", 9u}, {"kind", "gpu-memory-kill"}, {"bytes", 130 * MiB}, {"limit", 64 * MiB}}}};
  nlohmann::json step = {{"lease", "b7ced5edfc02"},
                         {"declared", {{"gpu_memory_max", 64 * MiB}}},
                         {"parent", "0123456789ab"},
                         {"parent_view",
                          {{"lease", "0123456789ab"},
                           {"declared", {{"gpu_memory_max", 64 * MiB}}},
                           {"gpu", {{"peak_bytes", 130 * MiB}}},
                           {"ledger", {killRow}}}}};
  auto b = stepBoundFromLease(step);
  ASSERT_TRUE(b) << b.error().message;
  ASSERT_TRUE(b->jobKill);
  EXPECT_FALSE(b->kill) << "the step's own bound did not kill it";
  EXPECT_EQ(boundLines(42, 1, *b),
            (std::vector<std::string>{"tally: StepId=42.1 killed with its job: the job's GPU "
                                      "memory 130.0 MiB over its gpu_memory_max 64.0 MiB on "
                                      "this node"}));
  auto job = stepBoundFromLease(step["parent_view"]);
  ASSERT_TRUE(job);
  EXPECT_EQ(jobSummary("node1", *job),
            "tally node1: GPU peak 130.0 MiB of 64.0 MiB; its steps killed at 130.0 MiB over its "
            "bound 64.0 MiB");
  // Live, the daemon says the kill under gpu_bound (no ledger rows in a live view).
  nlohmann::json live = {{"declared", {{"gpu_memory_max", 64 * MiB}}},
                         {"parent_view", {{"gpu_bound", {{"kill", killRow["body"]}}}}}};
  auto fromLive = stepBoundFromLease(live);
  ASSERT_TRUE(fromLive) << fromLive.error().message;
  ASSERT_TRUE(fromLive->jobKill);
  EXPECT_EQ(fromLive->jobKill->bytes, 130 * MiB);
  // A step granted after the job's kill (the job ran on) did not die with it.
  nlohmann::json later = step;
  later["granted_at_ns"] = 10u;
  auto after = stepBoundFromLease(later);
  ASSERT_TRUE(after) << after.error().message;
  EXPECT_FALSE(after->jobKill) << "the job's kill at 9 ns was before this step";
  later["granted_at_ns"] = 9u;
  EXPECT_TRUE(stepBoundFromLease(later)->jobKill);
  step["parent_view"]["ledger"][0]["body"]["kind"] = 7;
  EXPECT_FALSE(stepBoundFromLease(step)) << "a malformed parent_view is refused, not skipped";
}

// The step's tasks' wait statuses as the one the daemon records: a signal
// first (the step was killed), else the highest exit code, as sacct shows.
TEST(SlurmStep, TheTasksWaitStatusesAreReportedAsOne) {
  auto w = [](int code) { return code << 8; };  // WIFEXITED status
  EXPECT_EQ(stepExit("l", {}), std::nullopt) << "no task reaped: nothing reported";
  auto ok = stepExit("l", {w(0), w(0)});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->exitCode, 0);
  auto worst = stepExit("l", {w(0), w(3), w(1)});
  EXPECT_EQ(worst->exitCode, 3);
  auto killed = stepExit("l", {w(0), 9, w(2)});  // WIFSIGNALED: SIGKILL
  EXPECT_EQ(killed->signal, 9);
  EXPECT_EQ(killed->exitCode, std::nullopt);
  EXPECT_EQ(killed->lease, "l");
  // What the plugin sends is what the daemon's decoder takes.
  EXPECT_TRUE(rpc::api::decodeExited(rpc::api::encode(*killed)));
}

TEST(SlurmStep, TheFlagCapsTheGresAndOptionsCarryThrough) {
  StepFacts f = facts();
  f.gresBytes = 64 * MiB;
  f.stepId = kBatchStep;
  StepOptions o;
  o.gpuMemoryMax = "48M";
  o.gpuMemoryHigh = "32M";
  o.pool = "big";
  o.attrs = {"model=qwen3-32b", "team=ml"};
  PluginArgs a;
  a.allowedPools = {"big"};
  a.queueTimeoutUs = 5'000'000;
  ASSERT_TRUE(checkOptions(o));
  auto r = stepRequest(a, o, f);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->declared.declaration.gpuMemoryMax, 48 * MiB) << "under the GRES: the flag counts";
  EXPECT_EQ(r->declared.declaration.gpuMemoryHigh, 32 * MiB);
  EXPECT_EQ(r->declared.pools, std::vector<std::string>{"big"});
  EXPECT_TRUE(r->declared.noWait) << "Slurm placed it: granted now or refused, never queued";
  EXPECT_EQ(r->declared.timeoutUs, std::nullopt) << "queue_timeout= is ignored";
  EXPECT_EQ(r->declared.declaration.name, "slurm-42.batch");
  EXPECT_EQ(r->declared.declaration.attributes.at("slurm_step_id"), "batch");
  EXPECT_EQ(r->declared.declaration.attributes.at("model"), "qwen3-32b");
  EXPECT_EQ(r->declared.declaration.attributes.at("team"), "ml");
}

// The job is the unit Slurm gives GRES to: one lease of the job's cgroup in
// the pool, bounded by the job's count here, asked for as attach-or-join; each
// step (the batch script's too) is a child of it holding no pool.
TEST(SlurmStep, TheJobIsLeasedOnceAndEachStepIsItsChild) {
  StepFacts f = facts();
  f.gresBytes = 768 * MiB;
  f.stepId = kBatchStep;
  f.jobCgroup = "/system.slice/node1_slurmstepd.scope/job_42";
  auto job = jobRequest(PluginArgs{}, StepOptions{}, f);
  ASSERT_TRUE(job) << job.error().message;
  EXPECT_EQ(job->target.cgroup, f.jobCgroup);
  EXPECT_EQ(job->declared.pools, std::vector<std::string>{"slurm"});
  EXPECT_EQ(job->declared.declaration.gpuMemoryMax, 768 * MiB);
  EXPECT_EQ(job->declared.declaration.name, "slurm-42");
  EXPECT_TRUE(job->join);
  EXPECT_TRUE(job->declared.noWait);
  EXPECT_TRUE(job->declared.placed) << "Slurm's placement is the budget: no headroom refusal";
  EXPECT_FALSE(job->reportsExit) << "the job's cgroup holds slurmstepd; no task status is its";
  EXPECT_EQ(job->declared.declaration.attributes.count("slurm_step_id"), 0u);
  EXPECT_EQ(job->declared.declaration.attributes.at("slurm_job_id"), "42");
  auto wire = rpc::api::decodeAttach(rpc::api::encode(*job));
  ASSERT_TRUE(wire) << wire.error().message;
  EXPECT_TRUE(wire->join);
  EXPECT_TRUE(wire->declared.placed);

  f.jobLease = "0123456789ab";
  for (std::uint32_t step : {kBatchStep, 0u, 1u}) {
    f.stepId = step;
    auto s = stepRequest(PluginArgs{}, StepOptions{}, f);
    ASSERT_TRUE(s) << s.error().message;
    EXPECT_EQ(s->parent, "0123456789ab");
    EXPECT_TRUE(s->declared.pools.empty()) << "counted once, in the job's lease";
    EXPECT_EQ(s->declared.declaration.gpuMemoryMax, 768 * MiB);
    auto back = rpc::api::decodeAttach(rpc::api::encode(*s));
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(back->parent, "0123456789ab");
    EXPECT_TRUE(back->declared.pools.empty());
  }
  // A step that asked for less than its job holds is bounded by its own ask.
  f.stepGresBytes = 256 * MiB;
  EXPECT_EQ(stepRequest(PluginArgs{}, StepOptions{}, f)->declared.declaration.gpuMemoryMax,
            256 * MiB);
  StepOptions less;
  less.gpuMemoryMax = "128M";
  EXPECT_EQ(stepRequest(PluginArgs{}, less, f)->declared.declaration.gpuMemoryMax, 128 * MiB);
}

// enforce=off: a node without the GRES sharing plugstack.conf.
TEST(SlurmStep, EnforceOffIsReadAndAnythingElseRefused) {
  auto off = parsePluginArgs({"enforce=off"});
  ASSERT_TRUE(off) << off.error().message;
  EXPECT_FALSE(off->enforce);
  EXPECT_TRUE(parsePluginArgs({})->enforce);
  EXPECT_TRUE(parsePluginArgs({"enforce=on"})->enforce);
  EXPECT_FALSE(parsePluginArgs({"enforce=no"}));
  // The AdminComment line is the site's to turn on (jobstats and the like write there too).
  EXPECT_FALSE(parsePluginArgs({})->adminComment);
  EXPECT_TRUE(parsePluginArgs({"admin_comment=on"})->adminComment);
  auto bad = parsePluginArgs({"admin_comment=yes"});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("admin_comment: must be on or off"), std::string::npos);
}

// job_cache: where a job's GRES is kept for its other steps; off: every step asks.
TEST(SlurmStep, JobCacheIsADirectoryOrOff) {
  EXPECT_EQ(parsePluginArgs({})->jobCache, "/run/tally-slurm");
  EXPECT_EQ(parsePluginArgs({"job_cache=/var/run/ts"})->jobCache, "/var/run/ts");
  EXPECT_EQ(parsePluginArgs({"job_cache=off"})->jobCache, "");
  for (const char* bad : {"job_cache=", "job_cache=relative", "job_cache=/"}) {
    auto r = parsePluginArgs({bad});
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().message.find("job_cache: must be an absolute directory path"),
              std::string::npos)
        << r.error().message;
  }
}

TEST(SlurmStep, TheJobsCgroupIsFoundFromAnyOfItsProcesses) {
  EXPECT_EQ(*jobCgroup("0::/system.slice/slurmstepd.scope/job_7/step_0/user/task_0\n"),
            "/system.slice/slurmstepd.scope/job_7");
  EXPECT_EQ(*jobCgroup("0::/system.slice/slurmstepd.scope/job_7/step_extern/slurm\n"),
            "/system.slice/slurmstepd.scope/job_7");
  EXPECT_EQ(*jobCgroup("0::/a/job_1/b/job_12/step_batch/user/task_0\n"), "/a/job_1/b/job_12");
  // Slurm 26.05's default: the job's cgroup is named by its SLUID (seen in the VM).
  EXPECT_EQ(
      *jobCgroup("0::/system.slice/vm_slurmstepd.scope/sEBHM95T5EZZ00/step_0/user/task_special\n"),
      "/system.slice/vm_slurmstepd.scope/sEBHM95T5EZZ00");
  EXPECT_EQ(*jobCgroup("0::/s/sEBHM95T5N6A00/step_extern/slurm\n"), "/s/sEBHM95T5N6A00");
  EXPECT_TRUE(jobCgroupLeaf("job_42"));
  EXPECT_TRUE(jobCgroupLeaf("s0123456789ABC"));
  for (std::string_view leaf : {"job_", "job_4x", "sEBHM95T5EZZ0", "sEBHM95T5EZZ000",
                                "SEBHM95T5EZZ00", "sEBHM95T5EZZ0I", "sebhm95t5ezz00", "step_0", ""})
    EXPECT_FALSE(jobCgroupLeaf(leaf)) << leaf;
  for (const char* bad :
       {"0::/system.slice/job_7\n", "0::/job_x/step_0\n", "0::/\n", "1:memory:/job_7/step_0\n", "",
        "0::/sEBHM95T5EZZ0/step_0/user/task_0\n", "0::/step_0/user\n"}) {
    auto r = jobCgroup(bad);
    EXPECT_FALSE(r) << bad;
  }
}

// Placement is Slurm's: the flag never takes more than the GRES gives, nor
// anything without one, and a pool is one the operator allowed.
TEST(SlurmStep, TheFlagNeverOverrulesPlacementNorThePoolTheOperator) {
  StepFacts f = facts();
  f.gresBytes = 64 * MiB;
  StepOptions above;
  above.gpuMemoryMax = "96M";
  auto capped = stepRequest(PluginArgs{}, above, f);
  ASSERT_TRUE(capped) << capped.error().message;
  EXPECT_EQ(capped->declared.declaration.gpuMemoryMax, 64 * MiB) << "the GRES caps the flag";
  f.gresBytes = std::nullopt;
  auto alone = stepRequest(PluginArgs{}, above, f);
  ASSERT_FALSE(alone);
  EXPECT_EQ(alone.error().message,
            "--gpu-memory-max=96M: the job holds no tallymem GRES on this node, and Slurm places "
            "GPU memory by that GRES: --gpu-memory-max only caps what it gives. Ask for it: "
            "--gres=tallymem:96M");
  f.gresBytes = 0u;
  EXPECT_FALSE(stepRequest(PluginArgs{}, above, f)) << "a GRES of 0 gives nothing to cap";
  f.gresBytes = 64 * MiB;
  StepOptions pool;
  pool.pool = "batch";
  auto refused = stepRequest(PluginArgs{}, pool, f);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().message,
            "--tally-pool=batch: not a pool steps may join on this node (slurm: plugstack.conf's "
            "pool= and allowed_pools=)");
  pool.pool = "slurm";
  EXPECT_TRUE(stepRequest(PluginArgs{}, pool, f)) << "the plugin's own pool by name";
  auto args = parsePluginArgs({"allowed_pools=batch,big"});
  ASSERT_TRUE(args) << args.error().message;
  EXPECT_EQ(args->allowedPools, (std::vector<std::string>{"batch", "big"}));
  pool.pool = "batch";
  EXPECT_TRUE(stepRequest(*args, pool, f));
  EXPECT_FALSE(parsePluginArgs({"allowed_pools=a,,b"}));
  EXPECT_FALSE(parsePluginArgs({"allowed_pools=a b"}));
}

// Under a misconfigured plugin only these steps are refused (the rest run
// unleased: the site's no_gres policy is unknown then).
TEST(SlurmStep, WhatAStepDeclaredIsItsBoundGresFlagsPoolOrAttributes) {
  EXPECT_FALSE(declaresAnything(StepOptions{}, std::nullopt));
  EXPECT_FALSE(declaresAnything(StepOptions{}, 0u)) << "gpumem:0 declares no bound";
  EXPECT_TRUE(declaresAnything(StepOptions{}, 1u));
  StepOptions pool;
  pool.pool = "slurm";
  EXPECT_TRUE(declaresAnything(pool, std::nullopt));
  StepOptions attr;
  attr.attrs = {"model=x"};
  EXPECT_TRUE(declaresAnything(attr, std::nullopt));
  StepOptions high;
  high.gpuMemoryHigh = "1G";
  EXPECT_TRUE(declaresAnything(high, std::nullopt));
}

TEST(SlurmStep, OptionTyposAreRefusedWithTheOptionNamed) {
  auto refused = [](StepOptions o, std::string_view says) {
    auto s = checkOptions(o);
    ASSERT_FALSE(s);
    EXPECT_NE(s.error().message.find(says), std::string::npos) << s.error().message;
  };
  StepOptions o;
  o.gpuMemoryMax = "lots";
  refused(o, "--gpu-memory-max=lots");
  o.gpuMemoryMax = "0";
  EXPECT_TRUE(checkOptions(o)) << "0 is a bound: no GPU memory";
  o = {};
  o.gpuMemoryHigh = "0";
  refused(o, "--gpu-memory-high 0 would act on the lease at its first sample");
  o = {};
  o.gpuMemoryMax = "1G";
  o.gpuMemoryHigh = "2G";
  refused(o, "--gpu-memory-high 2.0 GiB is above --gpu-memory-max 1.0 GiB");
  o = {};
  o.pool = "a b";
  refused(o, "--tally-pool=a b");
  o = {};
  o.attrs = {"Model=x"};
  refused(o, "--tally-attr=Model=x");
  o.attrs = {"slurm_job_id=7"};
  refused(o, "slurm_* keys are the plugin's");
  o.attrs = {"slurm_qos=high"};  // not a key the plugin sets today: still its namespace
  refused(o, "slurm_* keys are the plugin's");
  o.attrs = std::vector<std::string>(10, "k=v");
  refused(o, "at most 7 (the plugin adds the 9 slurm_* ids)");
}

TEST(SlurmStep, PlugstackArgumentsAreCheckedByName) {
  auto a = parsePluginArgs({"socket=/run/t/t.sock", "pool=gpu", "gres=vram", "timeout=2s",
                            "queue_timeout=10m", "end_wait=500ms"});
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->socket, "/run/t/t.sock");
  EXPECT_EQ(a->pool, "gpu");
  EXPECT_EQ(a->gres, std::vector<std::string>{"vram"});
  EXPECT_EQ(a->timeoutUs, 2'000'000u);
  EXPECT_EQ(a->queueTimeoutUs, 600'000'000u);
  EXPECT_EQ(a->endWaitUs, 500'000u);
  // An older plugstack line's batch_pool= never stops slurmd: read, ignored.
  auto b = parsePluginArgs({"batch_pool=scripts"});
  ASSERT_TRUE(b);
  EXPECT_TRUE(b->batchPoolIgnored);
  auto d = parsePluginArgs({});
  ASSERT_TRUE(d);
  EXPECT_EQ(d->socket, "/run/tally/tally.sock");
  EXPECT_EQ(d->pool, "slurm");
  EXPECT_EQ(d->gres, std::vector<std::string>{"tallymem"}) << "a name of tally's own";
  auto moving = parsePluginArgs({"gres=tallymem,gpumem"});
  ASSERT_TRUE(moving) << moving.error().message;
  EXPECT_EQ(moving->gres, (std::vector<std::string>{"tallymem", "gpumem"}));
  EXPECT_FALSE(d->batchPoolIgnored);
  EXPECT_EQ(d->queueTimeoutUs, std::nullopt) << "absent: the daemon's own queue_timeout";
  for (auto [arg, says] :
       {std::pair{"sock=/x", "unknown"}, std::pair{"socket=rel", "absolute"},
        std::pair{"timeout=0", "more than 0"}, std::pair{"pool=", "pool name"},
        std::pair{"gres=gpu:2", "GRES names"}, std::pair{"gres=a,,b", "GRES names"},
        std::pair{"gres=", "GRES names"}, std::pair{"gres=a,b,c,d,e", "1 to 4"},
        std::pair{"gres=a\x01b", "GRES names"}, std::pair{"verbose", "KEY=VALUE"},
        std::pair{"timeout=soon", "timeout"}}) {
    auto r = parsePluginArgs({arg});
    ASSERT_FALSE(r) << arg;
    EXPECT_NE(r.error().message.find(says), std::string::npos) << r.error().message;
  }
}

// A plugstack.conf typo (or a key from a newer plugin, in a rolling upgrade)
// never stops the plugin: every problem is named at once, the bad keys keep
// their defaults, the good ones apply; the plugin then refuses the steps that
// declare GPU memory with this text (VmSlurm) and lets every other step run.
TEST(SlurmStep, EveryPlugstackProblemIsNamedAtOnceAndTheGoodKeysStillApply) {
  std::vector<std::string> problems;
  PluginArgs a = readPluginArgs(
      {"socket=/run/t/t.sock", "enforce=of", "pool=gpu", "gpu_policy=refuse", "verbose"}, problems);
  ASSERT_EQ(problems.size(), 3u);
  EXPECT_NE(problems[0].find("argument enforce: must be on or off"), std::string::npos)
      << problems[0];
  EXPECT_NE(problems[1].find("argument gpu_policy: unknown (keys: socket,"), std::string::npos)
      << problems[1];
  EXPECT_NE(problems[2].find("'verbose' is not KEY=VALUE"), std::string::npos) << problems[2];
  EXPECT_EQ(a.socket, "/run/t/t.sock");
  EXPECT_EQ(a.pool, "gpu");
  EXPECT_TRUE(a.enforce) << "a misspelt enforce= keeps enforcing (fail closed)";
  // The checkers' form: one error holding all three.
  auto strict =
      parsePluginArgs({"socket=/run/t/t.sock", "enforce=of", "gpu_policy=refuse", "verbose"});
  ASSERT_FALSE(strict);
  EXPECT_EQ(strict.error().message, problems[0] + "; " + problems[1] + "; " + problems[2]);
  // A bad list leaves the default list whole, never a part of the bad one.
  problems.clear();
  PluginArgs g = readPluginArgs({"gres=vram,,x", "allowed_pools=a,b c"}, problems);
  EXPECT_EQ(problems.size(), 2u);
  EXPECT_EQ(g.gres, std::vector<std::string>{"tallymem"});
  EXPECT_TRUE(g.allowedPools.empty());
  // The default names are then maybe not the site's: any step of a job that
  // holds any GRES is refused (spank_attach.cpp), not one of a CPU job.
  EXPECT_TRUE(g.gresUncertain);
  EXPECT_TRUE(a.gresUncertain) << "gpu_policy= (unknown) could be a misspelt gres=";
  for (std::vector<std::string> args :
       {std::vector<std::string>{"gress=gpumem"}, {"gres gpumem"}, {"gres="}, {"gres=a,b,c,d,e"}}) {
    problems.clear();
    EXPECT_TRUE(readPluginArgs(args, problems).gresUncertain) << args[0];
  }
  for (std::vector<std::string> args :
       {std::vector<std::string>{"enforce=of"}, {"socket=rel"}, {"pool="}, {"gres=gpumem"}, {}}) {
    problems.clear();
    EXPECT_FALSE(readPluginArgs(args, problems).gresUncertain) << (args.empty() ? "" : args[0]);
  }
}

// slurmd says at init when tally's GRES name is one Slurm means something by.
TEST(SlurmStep, AGresNameSlurmOwnsIsWarnedAbout) {
  EXPECT_TRUE(gresNameWarnings({"tallymem"}).empty());
  EXPECT_TRUE(gresNameWarnings({"vram"}).empty());
  auto own = gresNameWarnings({"tallymem", "gpumem"});
  ASSERT_EQ(own.size(), 1u);
  EXPECT_EQ(own[0].rfind("gres=gpumem: Slurm has its own gres/gpumem", 0), 0u) << own[0];
  EXPECT_NE(own[0].find("AccountingStorageTRES=gres/tallymem"), std::string::npos) << own[0];
  auto family = gresNameWarnings({"gpu_bytes"});
  ASSERT_EQ(family.size(), 1u);
  EXPECT_NE(family[0].find("names starting with gpu are Slurm's GPU family"), std::string::npos)
      << family[0];
  EXPECT_EQ(gresNameWarnings({"gpu", "shard", "mps"}).size(), 3u);
}

TEST(SlurmStep, TheLeaseIsTheStepsUserCgroupNeverSlurmstepd) {
  // As the VM's Slurm 22.05 places a task (cgroup/v2 under systemd 252).
  auto c = stepCgroup("0::/system.slice/vm_slurmstepd.scope/job_1/step_0/user/task_special\n");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(*c, "/system.slice/vm_slurmstepd.scope/job_1/step_0/user");
  auto t = stepCgroup("0::/system.slice/n_slurmstepd.scope/job_7/step_batch/user/task_0\n");
  ASSERT_TRUE(t);
  EXPECT_EQ(*t, "/system.slice/n_slurmstepd.scope/job_7/step_batch/user");
  // A hybrid host's v1 lines come first; the v2 line is what counts.
  auto h = stepCgroup("12:memory:/slurm/uid_0/job_1\n0::/s.scope/job_1/step_0/user/task_0\n");
  ASSERT_TRUE(h);
  EXPECT_EQ(*h, "/s.scope/job_1/step_0/user");
  for (const char* bad : {"0::/system.slice/vm_slurmstepd.scope/job_1/step_0/slurm\n",
                          "0::/user.slice/user-0.slice/session-1.scope\n", "0::/\n", "0::/task_0\n",
                          "0::/user/task_0\n", "12:memory:/slurm/uid_0/job_1\n", "",
                          "0::/a/job_1/step_0/user/task_0 (deleted)\n"}) {
    auto r = stepCgroup(bad);
    EXPECT_FALSE(r) << bad << " -> " << (r ? *r : "");
  }
  EXPECT_NE(stepCgroup("").error().message.find("CgroupPlugin=cgroup/v2"), std::string::npos);
}

}  // namespace
}  // namespace tally::slurm
