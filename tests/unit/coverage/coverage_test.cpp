// Coverage: the dmem parser on the real Strix Halo sample and hostile text,
// the probe's judgement at its thresholds, and the verdict it leads to.
#include "coverage/coverage.h"

#include <gtest/gtest.h>

#include "support/fake_host.h"

namespace tally {
namespace {

using coverage::ProbeOutcome;
constexpr std::int64_t MiB = 1 << 20;

TEST(Probe, JudgementAtItsThresholds) {
  std::string why;
  EXPECT_EQ(coverage::judgeProbe(64 * MiB, 64 * MiB, 64 * MiB, why), ProbeOutcome::Charged);
  EXPECT_EQ(
      why,
      "memory.current changed by +67108864 bytes for 67108864 bytes of GTT: charged to the cgroup");
  EXPECT_EQ(coverage::judgeProbe(64 * MiB, 64 * MiB - 64 * MiB / 10, 64 * MiB, why),
            ProbeOutcome::Charged);  // exactly 90 %
  EXPECT_EQ(coverage::judgeProbe(64 * MiB, 0, 64 * MiB, why), ProbeOutcome::NotCharged);
  EXPECT_EQ(coverage::judgeProbe(64 * MiB, -253952, 64 * MiB, why),
            ProbeOutcome::NotCharged);  // reclaim elsewhere in the cgroup (6.12 and 6.1 in the VM)
  EXPECT_EQ(why, "memory.current changed by -253952 bytes for 67108864 bytes of GTT: not charged");
  EXPECT_EQ(coverage::judgeProbe(64 * MiB, 16 * MiB, 64 * MiB, why),
            ProbeOutcome::Inconclusive);  // 25 %: neither
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
  charged.detail =
      "memory.current changed by +67108864 bytes for 67108864 bytes of GTT: charged to the cgroup";
  auto v = coverage::decide(signs, charged, "7.3.0", true);
  EXPECT_EQ(v.coverage, coverage::Coverage::HostAndGtt);
  EXPECT_EQ(v.line,
            "A lease's MemoryMax covers: host memory + GTT (verified by active probe on 7.3.0)");
  // Signs without a probe, or an inconclusive probe: host only, and tally keeps its own bound.
  auto unverified = coverage::decide(signs, std::nullopt, "7.3.0", true);
  EXPECT_EQ(unverified.coverage, coverage::Coverage::HostOnly);
  EXPECT_NE(unverified.basis.find("tally bounds GTT itself"), std::string::npos);
  EXPECT_NE(unverified.basis.find("run tally doctor --active"), std::string::npos);
  charged.outcome = ProbeOutcome::Inconclusive;
  EXPECT_EQ(coverage::decide(signs, charged, "7.3.0", true).coverage, coverage::Coverage::HostOnly);
  // No GPU: nothing uncharged to bound.
  EXPECT_NE(coverage::decide({}, std::nullopt, "6.1.0", false).basis.find("no GPU here"),
            std::string::npos);
}

}  // namespace
}  // namespace tally

namespace tally {
namespace {

// What a dmem.max on a region would bound, by the last part of its name.
TEST(DmemRegions, KindsByName) {
  using coverage::DmemKind;
  EXPECT_EQ(coverage::classifyDmemRegion("drm/0000:c6:00.0/vram"), DmemKind::Vram);
  EXPECT_EQ(coverage::classifyDmemRegion("drm/0000:03:00.0/vram0"), DmemKind::Vram);
  EXPECT_EQ(coverage::classifyDmemRegion("drm/0000:03:00.0/vram1"), DmemKind::Vram);
  EXPECT_EQ(coverage::classifyDmemRegion("drm/0000:c6:00.0/gtt"), DmemKind::Gtt);
  EXPECT_EQ(coverage::classifyDmemRegion("drm/0000:03:00.0/system"), DmemKind::Gtt);
  EXPECT_EQ(coverage::classifyDmemRegion("drm/0000:03:00.0/sysmem"), DmemKind::Gtt);
  EXPECT_EQ(coverage::classifyDmemRegion("drm/0000:03:00.0/stolen"), DmemKind::Unknown);
  EXPECT_EQ(coverage::classifyDmemRegion("drm/0000:03:00.0/mapped"), DmemKind::Unknown);
  EXPECT_EQ(coverage::classifyDmemRegion(""), DmemKind::Unknown);
  EXPECT_EQ(coverage::classifyDmemRegion("vram"), DmemKind::Vram);  // no slash at all
  EXPECT_STREQ(coverage::dmemKindName(DmemKind::Gtt), "gtt");
}

}  // namespace
}  // namespace tally
