// The kernel charge's probe, judged: what a path's line says given its
// figures -- charged exactly, differs, refused at the bound, not refused,
// not tried, not present -- which figure the charge was held to, and absent
// figures absent with their reason (never 0) in the JSON.
#include "coverage/charge_probe.h"

#include <gtest/gtest.h>

#include <cerrno>

namespace tally {
namespace {

using coverage::ChargeJudgement;
using coverage::ChargePath;
using coverage::Figure;
using coverage::PathResult;
using coverage::RefusalJudgement;

constexpr std::int64_t MiB = 1 << 20;

// A GEM_CREATE in GTT that went as it should: 64 MiB charged, fdinfo the
// same, no mem_info, refused at charge + 32 MiB.
PathResult amdgpuGtt() {
  PathResult p;
  p.path = ChargePath::AmdgpuGtt;
  p.present = true;
  p.device = "0000:c6:00.0";
  p.node = "/dev/dri/renderD128";
  p.requestedBytes = 64 * MiB;
  p.charge = 64 * MiB;
  p.fdinfo = Figure{64 * MiB, "drm-total-gtt", ""};
  p.memInfo = Figure{std::nullopt, "", "the device exports no mem_info_*_used"};
  p.boundBytes = 96 * MiB;
  p.chargeAtBound = 64 * MiB;
  p.chargeAfterTry = 64 * MiB;
  p.tryRc = -ENOMEM;
  p.refusedDelta = 1;
  return p;
}

TEST(ChargeProbe, ChargedExactlyAndRefusedAtTheBound) {
  auto p = amdgpuGtt();
  auto c = coverage::judgeCharge(p);
  EXPECT_EQ(c.judgement, ChargeJudgement::Exact);
  EXPECT_EQ(c.compared, "fdinfo");
  EXPECT_EQ(c.difference, 0);
  auto r = coverage::judgeRefusal(p);
  EXPECT_EQ(r.judgement, RefusalJudgement::Refused);
  EXPECT_EQ(coverage::pathLine(p),
            "charged exactly: charge 67108864 = fdinfo 67108864 (drm-total-gtt); mem_info absent "
            "(the device exports no mem_info_*_used); refused at the bound (ENOMEM: charge "
            "67108864 + 67108864 over bound 100663296; the charge stayed 67108864)");
  EXPECT_FALSE(coverage::pathFinding(p));
}

TEST(ChargeProbe, AChargeThatDiffersNamesEveryFigure) {
  auto p = amdgpuGtt();
  p.charge = 64 * MiB + 4096;
  p.memInfo = Figure{64 * MiB, "mem_info_gtt_used+mem_info_vram_used", ""};
  auto c = coverage::judgeCharge(p);
  EXPECT_EQ(c.judgement, ChargeJudgement::Differs);
  EXPECT_EQ(c.difference, 4096);
  EXPECT_EQ(c.words,
            "differs by 4096 bytes (charge 67112960, fdinfo 67108864 (drm-total-gtt), mem_info "
            "67108864 (mem_info_gtt_used+mem_info_vram_used) (device-wide: other clients move "
            "it); held to fdinfo)");
  EXPECT_TRUE(coverage::pathFinding(p));
  // Less charged than made differs too (the bound would be looser than said).
  p.charge = 60 * MiB;
  EXPECT_EQ(coverage::judgeCharge(p).difference, -4 * MiB);
  EXPECT_EQ(coverage::judgeCharge(p).words.rfind("differs by 4194304 bytes", 0), 0u);
}

// KFD on the test driver: fdinfo never shows its buffers, and there is no
// mem_info: the charge is held to the size asked, and says so.
TEST(ChargeProbe, WithNoDriverFigureTheSizeAskedIsTheMeasureAndSaid) {
  auto p = amdgpuGtt();
  p.path = ChargePath::KfdGtt;
  p.fdinfo = Figure{std::nullopt, "", "KFD's buffers are on no DRM file this probe can read"};
  auto c = coverage::judgeCharge(p);
  EXPECT_EQ(c.judgement, ChargeJudgement::Exact);
  EXPECT_EQ(c.compared, "requested");
  EXPECT_EQ(c.words,
            "charged exactly: charge 67108864 = the size asked, page-aligned (no driver figure: "
            "fdinfo absent (KFD's buffers are on no DRM file this probe can read); mem_info absent "
            "(the device exports no mem_info_*_used))");
  p.charge = 0;
  EXPECT_EQ(coverage::judgeCharge(p).judgement, ChargeJudgement::Differs);
  EXPECT_NE(coverage::judgeCharge(p).words.find("held to the size asked"), std::string::npos);
}

// The device's mem_info is the measure only where the client shows nothing.
TEST(ChargeProbe, MemInfoIsTheMeasureWhenFdinfoHasNone) {
  auto p = amdgpuGtt();
  p.fdinfo = Figure{std::nullopt, "", "not shown"};
  p.memInfo = Figure{64 * MiB, "mem_info_gtt_used", ""};
  auto c = coverage::judgeCharge(p);
  EXPECT_EQ(c.judgement, ChargeJudgement::Exact);
  EXPECT_EQ(c.compared, "mem_info");
  EXPECT_EQ(c.words,
            "charged exactly: charge 67108864 = mem_info 67108864 (mem_info_gtt_used) "
            "(device-wide); fdinfo absent (not shown)");
  // Beside fdinfo, a mem_info that agrees is just shown.
  p.fdinfo = Figure{64 * MiB, "drm-total-gtt", ""};
  EXPECT_EQ(coverage::judgeCharge(p).compared, "fdinfo");
  EXPECT_EQ(coverage::judgeCharge(p).words.find("device-wide"), std::string::npos);
}

TEST(ChargeProbe, AnAllocationPastTheBoundNotRefusedSaysWhatHappened) {
  auto p = amdgpuGtt();
  p.tryRc = 0;
  p.refusedDelta = 0;
  p.chargeAfterTry = 128 * MiB;
  auto r = coverage::judgeRefusal(p);
  EXPECT_EQ(r.judgement, RefusalJudgement::NotRefused);
  EXPECT_EQ(r.words,
            "not refused: the driver made it (charge 67108864 + 67108864 over bound 100663296)");
  EXPECT_TRUE(coverage::pathFinding(p));

  p.tryRc = -ENOMEM;  // the driver out of memory itself: not the bound
  EXPECT_EQ(coverage::judgeRefusal(p).words,
            "not refused by the kernel charge: the driver answered ENOMEM itself (the lease's "
            "refusal count did not move)");
  p.tryRc = -EINVAL;
  EXPECT_EQ(coverage::judgeRefusal(p).words,
            "not refused: the driver answered EINVAL (Invalid argument) (the bound was not what "
            "stopped it)");
  p.tryRc = -ENOMEM;  // refused, failing closed, not at the bound
  p.refusedDelta = 1;
  p.failsafeDelta = 1;
  p.failsafeReason = "object-quota";
  p.chargeAfterTry = 64 * MiB;
  EXPECT_EQ(coverage::judgeRefusal(p).judgement, RefusalJudgement::NotRefused);
  EXPECT_EQ(coverage::judgeRefusal(p).words,
            "not refused at the bound: refused failing closed (object-quota)");
}

TEST(ChargeProbe, ARefusalNotTriedIsNoFinding) {
  auto p = amdgpuGtt();
  p.tryRc.reset();
  p.refusalNotTried = "refusing off: the BPF LSM is not active";
  auto r = coverage::judgeRefusal(p);
  EXPECT_EQ(r.judgement, RefusalJudgement::NotTried);
  EXPECT_EQ(r.words, "refusal not tried: refusing off: the BPF LSM is not active");
  EXPECT_FALSE(coverage::pathFinding(p));
}

TEST(ChargeProbe, PathsNotPresentOrNotProbedSayWhy) {
  PathResult xe;
  xe.path = ChargePath::Xe;
  xe.notPresent = "no xe device (devices: tally_testdrm (amdgpu))";
  EXPECT_EQ(coverage::pathLine(xe), "not present (no xe device (devices: tally_testdrm (amdgpu)))");
  EXPECT_FALSE(coverage::pathFinding(xe));
  auto j = coverage::pathJson(xe);
  EXPECT_EQ(j["path"], "xe-gem-create");
  EXPECT_EQ(j["present"], false);
  EXPECT_EQ(j["not_present"], "no xe device (devices: tally_testdrm (amdgpu))");
  EXPECT_FALSE(j.contains("charge_delta_bytes"));

  auto failed = amdgpuGtt();
  failed.failed =
      "allocating 67108864 bytes on /dev/dri/renderD128: ENOSPC (No space left on device)";
  EXPECT_EQ(coverage::pathLine(failed),
            "could not be probed: allocating 67108864 bytes on /dev/dri/renderD128: ENOSPC (No "
            "space left on device)");
  EXPECT_FALSE(coverage::pathFinding(failed)) << "a check that could not run, not a finding";
  coverage::ChargeProbeResult r;
  r.paths = {xe, failed};
  EXPECT_TRUE(r.anyPathFailed());
  EXPECT_FALSE(r.anyFinding());
}

// Raw integer bytes; a figure the probe does not have is absent, with its
// reason beside, never 0.
TEST(ChargeProbe, JsonCarriesRawBytesAndAbsentFiguresWithTheirReason) {
  auto p = amdgpuGtt();
  p.path = ChargePath::KfdVram;
  p.fdinfo = Figure{std::nullopt, "", "KFD's buffers are on no DRM file this probe can read"};
  auto j = coverage::pathJson(p);
  EXPECT_EQ(j["path"], "kfd-alloc-vram");
  EXPECT_EQ(j["requested_bytes"], 64 * MiB);
  EXPECT_EQ(j["charge_delta_bytes"], 64 * MiB);
  EXPECT_FALSE(j.contains("fdinfo_delta_bytes"));
  EXPECT_EQ(j["fdinfo_absent"], "KFD's buffers are on no DRM file this probe can read");
  EXPECT_FALSE(j.contains("mem_info_delta_bytes"));
  EXPECT_EQ(j["mem_info_absent"], "the device exports no mem_info_*_used");
  EXPECT_EQ(j["charge"], "exact");
  EXPECT_EQ(j["compared_with"], "requested");
  EXPECT_EQ(j["difference_bytes"], 0);
  EXPECT_EQ(j["refusal"], "refused");
  EXPECT_EQ(j["bound_bytes"], 96 * MiB);
  EXPECT_EQ(j["charge_at_bound_bytes"], 64 * MiB);
  EXPECT_EQ(j["try_errno"], "ENOMEM");
  EXPECT_EQ(j["refused_count_delta"], 1);
  EXPECT_EQ(j["line"], coverage::pathLine(p));

  coverage::ChargeProbeResult r;
  r.outcome = coverage::ChargeProbeOutcome::Unavailable;
  r.detail = "off: the kernel has no BTF";
  auto u = coverage::chargeProbeJson(r);
  EXPECT_EQ(u, nlohmann::ordered_json(
                   {{"outcome", "unavailable"}, {"detail", "off: the kernel has no BTF"}}));
}

}  // namespace
}  // namespace tally
