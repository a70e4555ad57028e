// Coverage: the dmem parser on the real Strix Halo sample and hostile text,
// the probe's judgement at its thresholds, and the verdict it leads to.
#include <gtest/gtest.h>

#include "coverage/coverage.h"
#include "probes/dmem.h"
#include "support/fake_host.h"

namespace tally {
namespace {

using coverage::ProbeOutcome;
constexpr std::int64_t MiB = 1 << 20;

TEST(Dmem, ParsesTheStrixHaloSample) {
  auto text = testing::readFile(std::string(TALLY_FIXTURE_DIR) + "/dmem/dmem.capacity.strixhalo-7.1.8");
  auto r = probes::parseDmemCapacity(text);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].name, "drm/0000:c6:00.0/vram");
  EXPECT_EQ((*r)[0].bytes, 1073741824u);
  auto current = probes::parseDmemCapacity(testing::readFile(std::string(TALLY_FIXTURE_DIR) + "/dmem/dmem.current.strixhalo-7.1.8"));
  ASSERT_TRUE(current);
  EXPECT_EQ((*current)[0].bytes, 1006202880u);
}

TEST(Dmem, HostileTextIsRefusedNotGuessed) {
  EXPECT_TRUE(probes::parseDmemCapacity("")->empty());
  EXPECT_TRUE(probes::parseDmemCapacity("\n\n")->empty());
  EXPECT_FALSE(probes::parseDmemCapacity("drm/0000:03:00.0/stolen max\n"));         // dmem.max syntax, not a capacity
  EXPECT_FALSE(probes::parseDmemCapacity("drm/0000:03:00.0/vram0 99999999999999999999999\n"));  // overflow
  EXPECT_FALSE(probes::parseDmemCapacity("drm/0000:03:00.0/vram0\n"));              // truncated
  EXPECT_FALSE(probes::parseDmemCapacity(std::string("drm/a 12\0 34\n", 13)));       // NUL inside
  auto two = probes::parseDmemCapacity("drm/0000:03:00.0/vram0 8514437120\r\ndrm/0000:03:00.0/stolen\t67108864");
  ASSERT_TRUE(two);
  ASSERT_EQ(two->size(), 2u);
  EXPECT_EQ((*two)[1].name, "drm/0000:03:00.0/stolen");
  EXPECT_EQ((*two)[1].bytes, 67108864u);
}

TEST(Probe, JudgementAtItsThresholds) {
  std::string why;
  EXPECT_EQ(coverage::judgeProbe(64 * MiB, 64 * MiB, 64 * MiB, why), ProbeOutcome::Charged);
  EXPECT_EQ(why, "memory.current grew by 67108864 bytes for 67108864 bytes of GTT: charged to the cgroup");
  EXPECT_EQ(coverage::judgeProbe(64 * MiB, 64 * MiB - 64 * MiB / 10, 64 * MiB, why), ProbeOutcome::Charged);  // exactly 90 %
  EXPECT_EQ(coverage::judgeProbe(64 * MiB, 0, 64 * MiB, why), ProbeOutcome::NotCharged);
  EXPECT_EQ(coverage::judgeProbe(64 * MiB, -4096, 64 * MiB, why), ProbeOutcome::NotCharged);  // reclaim elsewhere in the cgroup
  EXPECT_EQ(coverage::judgeProbe(64 * MiB, 16 * MiB, 64 * MiB, why), ProbeOutcome::Inconclusive);  // 25 %: neither
  EXPECT_EQ(coverage::judgeProbe(64 * MiB, 32 * MiB, 64 * MiB, why), ProbeOutcome::Inconclusive);
  // fdinfo did not show the buffer: nothing can be concluded from memory.current.
  EXPECT_EQ(coverage::judgeProbe(64 * MiB, 64 * MiB, 0, why), ProbeOutcome::Inconclusive);
  EXPECT_NE(why.find("the driver does not show it"), std::string::npos);
}

TEST(Coverage, OnlyAChargedProbeHandsOver) {
  coverage::StaticSigns signs;
  signs.signs.push_back({"memory.stat gpu_active", true, "has gpu_active 0", true});
  coverage::ProbeResult charged;
  charged.outcome = ProbeOutcome::Charged;
  charged.driver = "amdgpu";
  charged.device = "0000:c6:00.0";
  charged.detail = "memory.current grew by 67108864 bytes for 67108864 bytes of GTT: charged to the cgroup";
  auto v = coverage::decide(signs, charged, "7.3.0", true);
  EXPECT_EQ(v.coverage, coverage::Coverage::HostAndGtt);
  EXPECT_EQ(v.line, "A lease's MemoryMax covers: host memory + GTT (verified by active probe on 7.3.0)");
  EXPECT_FALSE(v.degraded);
  // Signs without a probe, or an inconclusive probe: host only, and tally keeps its own bound.
  auto unverified = coverage::decide(signs, std::nullopt, "7.3.0", true);
  EXPECT_EQ(unverified.coverage, coverage::Coverage::HostOnly);
  EXPECT_TRUE(unverified.degraded);
  EXPECT_NE(unverified.basis.find("run tally doctor --active"), std::string::npos);
  charged.outcome = ProbeOutcome::Inconclusive;
  EXPECT_EQ(coverage::decide(signs, charged, "7.3.0", true).coverage, coverage::Coverage::HostOnly);
  // No GPU: nothing uncharged to bound, not degraded.
  EXPECT_FALSE(coverage::decide({}, std::nullopt, "6.1.0", false).degraded);
}

}  // namespace
}  // namespace tally
