// `tally doctor --slurm`: the node's own words read exactly (the texts are
// what Debian 12's Slurm 22.05 printed in the VM harness), and each way a
// node can be wrong for tally judged FAILED with the figures and the fix.
#include "slurm/health.h"

#include <gtest/gtest.h>

#include "slurm/node_samples.h"

namespace tally::slurm {
namespace {

constexpr std::uint64_t GiB = 1ULL << 30;

using samples::kScontrolNode;
using samples::kSlurmdV;
constexpr unsigned k2205 = 0x160508, k2411 = 0x180b05;

SlurmFacts healthy() {
  SlurmFacts f;
  f.plugstackPath = "/etc/slurm/plugstack.conf";
  f.plugstack = parsePlugstack("required tally_spank.so socket=/run/tally/tally.sock pool=slurm\n");
  f.pluginPath = "/usr/lib/x86_64-linux-gnu/slurm-wlm/tally_spank.so";
  f.pluginVersion = k2205;
  f.slurmdVersion = kSlurmdV;
  f.nodeRecord = kScontrolNode;
  f.daemonAnswered = true;
  f.poolFound = true;
  f.poolBudget = GiB;
  f.realMemoryBytes = *realMemoryOfScontrol(kScontrolNode);
  f.memTotalBytes = 2 * GiB;
  f.vramTotalBytes = 0;
  f.gttCeilingBytes = 2 * GiB;
  f.gttCeilingSource = "card0 graphics, the pool's gtt_ceiling = smaller";
  f.contain = false;
  f.poolCapacity = 8;
  f.nodeCpus = *cpusOfScontrol(kScontrolNode);
  return f;
}

const SlurmCheck* find(const std::vector<SlurmCheck>& checks, const std::string& name) {
  for (const auto& c : checks)
    if (c.name == name) return &c;
  return nullptr;
}

// The named check's verdict on `f`, by value; absent when it was not judged.
std::optional<SlurmCheck> judged(const SlurmFacts& f, const std::string& name) {
  auto checks = judgeSlurm(f);
  if (const SlurmCheck* c = find(checks, name)) return *c;
  return std::nullopt;
}

// Contain decides who makes a job's lease; pam_slurm_adopt without it puts
// ssh sessions in no job, outside every lease: that node fails.
TEST(SlurmHealth, PamSlurmAdoptWithoutContainFailsAndContainSaysWhoMakesTheJobLease) {
  SlurmFacts f = healthy();
  EXPECT_EQ(judged(f, "contain")->said,
            "no PrologFlags=Contain: each job's lease is made by its first step on this node");
  f.pamSlurmAdopt = true;
  auto bad = judged(f, "contain");
  EXPECT_EQ(bad->state, CheckState::Failed);
  EXPECT_NE(bad->said.find("Add PrologFlags=Contain to slurm.conf"), std::string::npos);
  f.contain = true;
  EXPECT_EQ(judged(f, "contain")->state, CheckState::Ok);
  f.contain.reset();
  f.containError = "scontrol show config: timed out";
  EXPECT_EQ(judged(f, "contain")->state, CheckState::Unknown);
}

// Every job is a lease: a pool that holds fewer jobs than the node has CPUs
// refuses the job past it.
TEST(SlurmHealth, APoolCapacityBelowTheNodesCpusFails) {
  SlurmFacts f = healthy();
  EXPECT_EQ(judged(f, "capacity")->said,
            "pool slurm holds 8 jobs at once, at least the node's 2 CPUs");
  f.poolCapacity = 1;
  auto low = judged(f, "capacity");
  EXPECT_EQ(low->state, CheckState::Failed);
  EXPECT_EQ(low->said,
            "pool slurm's capacity 1 is below the node's 2 CPUs, and every job here is a lease "
            "(no_gres): the job past 1 running at once is refused. Set capacity to at least 2 "
            "(more where jobs share CPUs)");
  f.nodeCpus.reset();
  f.nodeCpusError = "scontrol names no CPUTot for the node";
  EXPECT_EQ(judged(f, "capacity")->state, CheckState::Unknown);
}

// Read from slurmd's configless cache, the plugstack line says where it was found.
TEST(SlurmHealth, APlugstackFromTheConfiglessCacheSaysSo) {
  SlurmFacts f = healthy();
  f.plugstackPath = "/run/slurm/conf/plugstack.conf";
  f.plugstackConfigless = true;
  auto c = judged(f, "plugstack");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->state, CheckState::Ok);
  EXPECT_EQ(c->said,
            "required tally_spank.so socket=/run/tally/tally.sock pool=slurm (configless: "
            "/run/slurm/conf/plugstack.conf, slurmd's copy of the controller's)");
}

TEST(SlurmHealth, AHealthyNodePassesEveryCheckWithItsEvidence) {
  auto checks = judgeSlurm(healthy());
  ASSERT_EQ(checks.size(), 9u);
  for (const auto& c : checks) EXPECT_EQ(c.state, CheckState::Ok) << c.name << ": " << c.said;
  EXPECT_EQ(find(checks, "budget")->said,
            "pool slurm's gpu_memory_budget = the node's tallymem GRES, 1.0 GiB");
  EXPECT_EQ(find(checks, "plugin")->said,
            "/usr/lib/x86_64-linux-gnu/slurm-wlm/tally_spank.so built for Slurm 22.05, as slurmd");
  EXPECT_EQ(find(checks, "memory")->said,
            "RealMemory 512.0 MiB + the 1.0 GiB of tallymem GRES beyond the devices' 0 B of VRAM "
            "fit in MemTotal 2.0 GiB");
  EXPECT_EQ(find(checks, "ceiling")->said,
            "the 1.0 GiB of tallymem GRES beyond VRAM fits under the kernel's GTT ceiling 2.0 GiB "
            "(card0 graphics, the pool's gtt_ceiling = smaller)");
}

// The GRES beyond VRAM is GTT, and the driver refuses every allocation past
// its GTT ceiling: a GRES above it is a count Slurm grants that no job gets.
TEST(SlurmHealth, TheGresBeyondVramMustFitUnderTheKernelsGttCeiling) {
  auto f = healthy();
  f.nodeRecord = "NodeName=halo Gres=tallymem:96G RealMemory=28672\n";
  f.poolBudget = 96 * GiB;
  f.memTotalBytes = 128 * GiB;
  f.vramTotalBytes = 512ULL << 20;
  f.gttCeilingBytes = 64 * GiB;  // amdgpu.gttsize=65536, say
  f.gttCeilingSource = "card0 graphics";
  auto c = judged(f, "ceiling");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->state, CheckState::Failed);
  EXPECT_EQ(c->said,
            "the tallymem GRES 96.0 GiB is 95.5 GiB of GTT beyond the devices' 512.0 MiB of VRAM, "
            "more than the kernel lets the pool's clients hold (64.0 GiB, card0 graphics): a job "
            "granted its whole count fails allocating past it. Lower the GRES to 69256347648 or "
            "raise the GTT ceiling (docs/gpu.md, \"GTT ceiling\")");
  // VRAM unknown: counted as none, and said so (never "0 B of VRAM").
  f.vramTotalBytes.reset();
  EXPECT_NE(
      judged(f, "ceiling")->said.find("96.0 GiB of GTT beyond VRAM (unknown, counted as none)"),
      std::string::npos)
      << judged(f, "ceiling")->said;
  f.vramTotalBytes = 512ULL << 20;
  // Exactly at the ceiling: ok.
  f.gttCeilingBytes = 96 * GiB - (512ULL << 20);
  EXPECT_EQ(judged(f, "ceiling")->state, CheckState::Ok);
  // Unknown (a device whose ceiling the kernel does not say): unknown, never ok.
  f.gttCeilingBytes.reset();
  f.gttCeilingError = "card0's smaller GTT ceiling is unknown (tally doctor says why)";
  c = judged(f, "ceiling");
  EXPECT_EQ(c->state, CheckState::Unknown);
  EXPECT_NE(c->said.find("card0's smaller GTT ceiling is unknown"), std::string::npos) << c->said;
  // No GRES on the node: nothing to fit (the budget check says what is wrong).
  f = healthy();
  f.nodeRecord = "NodeName=vm Gres=(null) RealMemory=512\n";
  EXPECT_FALSE(judged(f, "ceiling"));
}

// On an APU the GRES is GTT, system RAM: docs/slurm.md's old RealMemory=120000
// with Gres=tallymem:96G on a 128 GiB box places the same RAM twice.
TEST(SlurmHealth, RealMemoryAndTheGresGttPartMustFitInRam) {
  auto f = healthy();
  f.nodeRecord = "NodeName=halo Gres=tallymem:96G RealMemory=120000\n";
  f.poolBudget = 96 * GiB;
  f.realMemoryBytes = 120000ULL << 20;
  f.memTotalBytes = 126 * GiB;
  f.vramTotalBytes = 512ULL << 20;
  auto c = judged(f, "memory");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->state, CheckState::Failed);
  EXPECT_NE(c->said.find("RealMemory 117.2 GiB + the 95.5 GiB of tallymem GRES beyond the "
                         "devices' 512.0 MiB of VRAM (GTT: host RAM) = 212.7 GiB, more than this "
                         "host's MemTotal 126.0 GiB"),
            std::string::npos)
      << c->said;
  EXPECT_NE(c->said.find("Set RealMemory to at most 31232 (MiB)"), std::string::npos) << c->said;
  f.realMemoryBytes = 30000ULL << 20;
  EXPECT_EQ(judged(f, "memory")->state, CheckState::Ok);
  // A dGPU whose VRAM holds the whole GRES: nothing of it is host RAM.
  f.realMemoryBytes = 120000ULL << 20;
  f.vramTotalBytes = 192 * GiB;
  EXPECT_EQ(judged(f, "memory")->state, CheckState::Ok);
  // VRAM unknown: counted as none (the stricter reading), and said so.
  f.vramTotalBytes.reset();
  EXPECT_NE(judged(f, "memory")->said.find("(VRAM unknown, counted as none)"), std::string::npos);
  // RealMemory unknown (slurmctld down): unknown, never ok.
  f.realMemoryBytes.reset();
  f.realMemoryError = "scontrol show node halo: Unable to contact slurm controller";
  c = judged(f, "memory");
  EXPECT_EQ(c->state, CheckState::Unknown);
  EXPECT_NE(c->said.find("Unable to contact slurm controller"), std::string::npos);
}

TEST(SlurmHealth, EachWayANodeIsWrongForTallyFailsWithTheFix) {
  // A plugin built for 24.11 on a 22.05 node: SPANK refuses it.
  auto f = healthy();
  f.pluginVersion = k2411;
  auto c = judged(f, "plugin");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->state, CheckState::Failed);
  EXPECT_NE(c->said.find("built for Slurm 24.11, and slurmd here is 22.05"), std::string::npos)
      << c->said;
  // The pool's budget is not the GRES: Slurm places by one, tally grants by the other.
  f = healthy();
  f.poolBudget = 2 * GiB;
  c = judged(f, "budget");
  EXPECT_EQ(c->state, CheckState::Failed);
  EXPECT_NE(c->said.find("Set gpu_memory_budget = 1073741824"), std::string::npos) << c->said;
  f.poolBudget.reset();
  EXPECT_EQ(judged(f, "budget")->state, CheckState::Failed) << "no budget at all";
  f = healthy();
  f.poolFound = false;
  EXPECT_NE(judged(f, "budget")->said.find("the daemon has no pool slurm"), std::string::npos);
  // No GRES on the node: Slurm places no GPU memory here.
  f = healthy();
  f.nodeRecord = "NodeName=vm Gres=(null) RealMemory=512\n";
  c = judged(f, "budget");
  EXPECT_EQ(c->state, CheckState::Failed);
  EXPECT_NE(c->said.find("slurmctld's record of this node names no tallymem GRES"),
            std::string::npos)
      << c->said;
  // The daemon down: named with the socket; its budget cannot be judged.
  f = healthy();
  f.daemonAnswered = false;
  f.daemonError = "connect /run/tally/tally.sock: No such file or directory";
  auto checks = judgeSlurm(f);
  EXPECT_EQ(find(checks, "daemon")->state, CheckState::Failed);
  EXPECT_EQ(find(checks, "budget"), nullptr);
  // No tally line: the node runs steps without tally.
  f = healthy();
  f.plugstack = parsePlugstack("include /etc/slurm/plugstack.conf.d/*.conf\n");
  checks = judgeSlurm(f);
  EXPECT_EQ(find(checks, "plugstack")->state, CheckState::Failed);
  EXPECT_EQ(find(checks, "plugin"), nullptr);
  // A typo in its arguments.
  f = healthy();
  f.plugstack = parsePlugstack("required tally_spank.so socket=relative.sock\n");
  c = judged(f, "plugstack");
  EXPECT_EQ(c->state, CheckState::Failed);
  EXPECT_NE(c->said.find("socket"), std::string::npos) << c->said;
  // optional: passes, and says what optional costs.
  f = healthy();
  f.plugstack = parsePlugstack("optional tally_spank.so\n");
  c = judged(f, "plugstack");
  EXPECT_EQ(c->state, CheckState::Ok);
  EXPECT_NE(c->said.find("Slurm runs every step without it"), std::string::npos);
  // slurmd not answering: the version is unknown, not a failure.
  f = healthy();
  f.slurmdVersion.reset();
  f.slurmdError = "slurmd -V: No such file or directory";
  checks = judgeSlurm(f);
  EXPECT_EQ(find(checks, "plugin")->state, CheckState::Unknown);
  EXPECT_EQ(find(checks, "budget")->state, CheckState::Ok) << "the GRES is slurmctld's";
  // slurmctld not answering: the node's GRES is unknown, with scontrol's words.
  f = healthy();
  f.nodeRecord.reset();
  f.nodeRecordError = "scontrol show node vm: Unable to contact slurm controller";
  c = judged(f, "budget");
  EXPECT_EQ(c->state, CheckState::Unknown);
  EXPECT_NE(c->said.find("Unable to contact slurm controller"), std::string::npos) << c->said;
}

}  // namespace
}  // namespace tally::slurm
