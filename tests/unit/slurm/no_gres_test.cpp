// A job without the GRES on a managed node (plugstack.conf no_gres=): the
// site's policy read, its bound on the job's lease and each step's, the
// step's stderr naming it when it refuses, and the doctor's check of it.
#include <gtest/gtest.h>

#include "slurm/health.h"
#include "slurm/node_samples.h"
#include "slurm/step.h"

namespace tally::slurm {
namespace {

constexpr std::uint64_t MiB = 1ULL << 20;

using Kind = NoGresPolicy::Kind;

StepFacts noGresJob() {
  StepFacts f;
  f.jobId = 42;
  f.stepId = 0;
  f.user = "alice";
  f.partition = "cpu";
  f.cgroup = "/system.slice/node1_slurmstepd.scope/job_42/step_0/user";
  f.jobCgroup = "/system.slice/node1_slurmstepd.scope/job_42";
  return f;
}

PluginArgs argsWith(const std::string& noGres) {
  auto a = parsePluginArgs({"no_gres=" + noGres});
  EXPECT_TRUE(a) << a.error().message;
  return a ? *a : PluginArgs{};
}

TEST(SlurmNoGres, TheDefaultIsNoGpuMemoryAndASiteMaySetACapOrMeterOnly) {
  auto dflt = parsePluginArgs({});
  ASSERT_TRUE(dflt);
  EXPECT_EQ(dflt->noGres.kind, Kind::kRefuse);
  EXPECT_EQ(argsWith("refuse").noGres.kind, Kind::kRefuse);
  EXPECT_EQ(argsWith("meter").noGres.kind, Kind::kMeter);
  PluginArgs cap = argsWith("256M");
  EXPECT_EQ(cap.noGres.kind, Kind::kCap);
  EXPECT_EQ(cap.noGres.capBytes, 256 * MiB);
  EXPECT_EQ(describe(cap.noGres), "256.0 MiB");
  // A cap of 0 is refuse by another name, said as such; the rest are typos.
  for (const char* bad : {"no_gres=0", "no_gres=lots", "no_gres=", "no_gres=Refuse"}) {
    auto r = parsePluginArgs({bad});
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().message.find("plugstack.conf argument no_gres: must be refuse (no GPU "
                                     "memory without the GRES), a size such as 256M"),
              std::string::npos)
        << r.error().message;
  }
  std::vector<std::string> problems;
  PluginArgs kept = readPluginArgs({"no_gres=lots", "pool=gpu"}, problems);
  EXPECT_EQ(problems.size(), 1u);
  EXPECT_EQ(kept.noGres.kind, Kind::kRefuse) << "a bad value keeps the safe default";
  EXPECT_EQ(kept.pool, "gpu") << "the good keys still apply";
}

// The job's lease is made for a job without the GRES too, bounded by the
// policy and marked with it; its steps are its children, bounded the same.
TEST(SlurmNoGres, AJobWithoutTheGresIsLeasedUnderThePolicyAndItsStepsInsideIt) {
  struct Case {
    std::string policy;
    std::optional<std::uint64_t> bound;
    std::string attribute;
  } cases[] = {
      {"refuse", 0u, "refuse"},
      {"64M", 64 * MiB, "67108864"},
      {"meter", std::nullopt, "meter"},
  };
  for (const auto& c : cases) {
    PluginArgs args = argsWith(c.policy);
    StepFacts f = noGresJob();
    for (std::optional<std::uint64_t> none :
         {std::optional<std::uint64_t>{}, std::optional<std::uint64_t>{0u}}) {
      f.gresBytes = none;
      EXPECT_EQ(jobBound(args, f), c.bound) << c.policy;
      auto job = jobRequest(args, StepOptions{}, f);
      ASSERT_TRUE(job) << job.error().message;
      EXPECT_EQ(job->declared.declaration.gpuMemoryMax, c.bound) << c.policy;
      EXPECT_EQ(job->declared.pools, std::vector<std::string>{"slurm"});
      EXPECT_EQ(job->target.cgroup, f.jobCgroup);
      EXPECT_TRUE(job->join);
      EXPECT_TRUE(job->declared.noWait) << "a step Slurm placed never waits on tally";
      EXPECT_EQ(job->declared.declaration.attributes.at("slurm_no_gres"), c.attribute);
    }
    f.jobLease = "0123456789ab";
    auto step = stepRequest(args, StepOptions{}, f);
    ASSERT_TRUE(step) << step.error().message;
    EXPECT_EQ(step->parent, "0123456789ab");
    EXPECT_EQ(step->declared.declaration.gpuMemoryMax, c.bound) << c.policy;
    EXPECT_EQ(step->declared.declaration.attributes.count("slurm_no_gres"), 0u)
        << "the job's lease carries the policy";
    // --gpu-memory-max still needs the GRES: the policy is no way around placement.
    StepOptions flag;
    flag.gpuMemoryMax = "32M";
    auto refused = stepRequest(args, flag, f);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message.find("Ask for it: --gres=tallymem:32M"), std::string::npos)
        << refused.error().message;
  }
  // A job that holds the GRES is bounded by it, whatever the policy says.
  StepFacts placed = noGresJob();
  placed.gresBytes = 768 * MiB;
  for (const char* policy : {"refuse", "64M", "meter"}) {
    auto job = jobRequest(argsWith(policy), StepOptions{}, placed);
    ASSERT_TRUE(job);
    EXPECT_EQ(job->declared.declaration.gpuMemoryMax, 768 * MiB) << policy;
    EXPECT_EQ(job->declared.declaration.attributes.count("slurm_no_gres"), 0u) << policy;
  }
}

// Where the bound refused (or killed), the step's stderr says that the job
// holds no GRES, what the node gives without it, and how to ask.
TEST(SlurmNoGres, TheStepsStderrSaysWhyItWasRefusedAndHowToAsk) {
  StepBound b;
  b.refused = 1;
  b.refusedBytes = 64 * MiB;
  b.max = 0;
  NoGresHint refuse{"tallymem", {}};
  EXPECT_EQ(boundLines(42, 0, b, refuse),
            (std::vector<std::string>{
                "tally: StepId=42.0: 1 GPU allocation refused in the kernel at gpu_memory_max 0 B "
                "(64.0 MiB asked)",
                "tally: StepId=42.0: the job holds no tallymem GRES on this node, and a job "
                "without it gets no GPU memory here (plugstack.conf's no_gres); ask for what it "
                "needs: --gres=tallymem:SIZE"}));
  NoGresHint cap{"gpumem", {Kind::kCap, 32 * MiB}};
  b.max = 32 * MiB;
  auto lines = boundLines(7, kBatchStep, b, cap);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1],
            "tally: StepId=7.batch: the job holds no gpumem GRES on this node, and a job without "
            "it gets at most 32.0 MiB of GPU memory here (plugstack.conf's no_gres); ask for what "
            "it needs: --gres=gpumem:SIZE");
  // Nothing refused or killed: nothing said, hint or not.
  EXPECT_TRUE(boundLines(42, 0, StepBound{}, refuse).empty());
  // Read from the daemon's reply, a bound of 0 is 0, never absent.
  nlohmann::json reply = {{"declared", {{"gpu_memory_max", 0u}}},
                          {"gpu", {{"allocations_refused", 1u}, {"refused_bytes", 16 * MiB}}}};
  auto read = stepBoundFromLease(reply);
  ASSERT_TRUE(read) << read.error().message;
  ASSERT_TRUE(read->max);
  EXPECT_EQ(*read->max, 0u);
  EXPECT_EQ(boundLines(42, 0, *read, refuse)[0],
            "tally: StepId=42.0: 1 GPU allocation refused in the kernel at gpu_memory_max 0 B "
            "(16.0 MiB asked)");
  // A GRES job's lines never carry the hint.
  EXPECT_EQ(boundLines(42, 0, b).size(), 1u);
}

SlurmFacts nodeWith(const std::string& plugstackArgs, std::optional<std::uint64_t> budget) {
  SlurmFacts f;
  f.plugstackPath = "/etc/slurm/plugstack.conf";
  f.plugstack = parsePlugstack("required tally_spank.so " + plugstackArgs + "\n");
  f.nodeRecord = samples::kScontrolNode;
  f.daemonAnswered = true;
  f.poolFound = true;
  f.poolBudget = budget;
  return f;
}

std::optional<SlurmCheck> noGresCheck(const SlurmFacts& f) {
  for (const auto& c : judgeSlurm(f))
    if (c.name == "no_gres") return c;
  return std::nullopt;
}

TEST(SlurmNoGres, TheDoctorFailsAPolicyThePoolCannotGrant) {
  constexpr std::uint64_t GiB = 1ULL << 30;
  auto meter = noGresCheck(nodeWith("no_gres=meter", GiB));
  ASSERT_TRUE(meter);
  EXPECT_EQ(meter->state, CheckState::Failed);
  EXPECT_NE(meter->said.find("a budgeted pool grants only leases that declare gpu_memory_max"),
            std::string::npos)
      << meter->said;
  auto meterUnbudgeted = noGresCheck(nodeWith("no_gres=meter", std::nullopt));
  ASSERT_TRUE(meterUnbudgeted);
  EXPECT_EQ(meterUnbudgeted->state, CheckState::Ok) << meterUnbudgeted->said;
  // A cap would count in the budget Slurm's placements fill: a placed job
  // could be refused for a CPU job's cap. Not supported beside a budget.
  auto cap = noGresCheck(nodeWith("no_gres=256M", GiB));
  ASSERT_TRUE(cap);
  EXPECT_EQ(cap->state, CheckState::Failed);
  EXPECT_NE(cap->said.find("no_gres=256.0 MiB counts in pool slurm's gpu_memory_budget 1.0 GiB"),
            std::string::npos)
      << cap->said;
  auto capAlone = noGresCheck(nodeWith("no_gres=256M", std::nullopt));
  ASSERT_TRUE(capAlone);
  EXPECT_EQ(capAlone->state, CheckState::Ok) << capAlone->said;
  auto refuse = noGresCheck(nodeWith("", GiB));
  ASSERT_TRUE(refuse);
  EXPECT_EQ(refuse->state, CheckState::Ok);
  EXPECT_NE(refuse->said.find("gets no GPU memory here (no_gres=refuse)"), std::string::npos)
      << refuse->said;
  // Not judged without the daemon's pools to judge it against.
  SlurmFacts down = nodeWith("no_gres=meter", GiB);
  down.daemonAnswered = false;
  EXPECT_FALSE(noGresCheck(down));
}

}  // namespace
}  // namespace tally::slurm
