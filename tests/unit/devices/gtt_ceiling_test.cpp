// The GTT ceilings as the kernel computes them: graphics (the GTT manager's
// size) and compute (the smallest of the GTT manager, KFD's TTM limit and
// KFD's system limit, per kernel era), the TTM module that serves a device,
// ROCm's placement on an APU and the advice, on synthetic sysfs trees shaped
// like the kernel's. Every expected figure is worked out in the comments.
#include "devices/gtt_ceiling.h"

#include <gtest/gtest.h>

#include "support/fake_host.h"

namespace tally::devices {
namespace {

using namespace tally::testing;

constexpr std::uint64_t GiB = 1ULL << 30;
constexpr std::uint64_t MiB = 1ULL << 20;
constexpr std::uint64_t kPage = 4096;
// KFD's system limit on a 128 GiB host, 6.7 and later
// (amdgpu_amdkfd_gpuvm_init_mem_limits): 128 GiB - 128 GiB/64 - 1.5 GiB.
constexpr std::uint64_t kSystemLimit128 = 128 * GiB - 2 * GiB - 3 * GiB / 2;  // 124.5 GiB

struct GttCeilingTest : ::testing::Test {
  FakeHost host;
  std::optional<fs::Root> sys;
  std::string kernel = "6.12.117+deb12-amd64";
  std::uint64_t memTotal = 128 * GiB;

  // A Strix Halo: amdgpu's GTT domain and carve-out as sysfs shows them.
  void apu(std::uint64_t gttTotal, std::uint64_t gttUsed, std::uint64_t vramTotal = 512 * MiB) {
    host.addDevice({"0000:c6:00.0",
                    "amdgpu",
                    {1, 128},
                    {{"gtt_total", gttTotal}, {"gtt_used", gttUsed}, {"vram_total", vramTotal}},
                    true});
    sys.emplace(std::move(*fs::Root::open(host.sysRoot())));
  }
  DrmDevice device() {
    auto map = discoverDrmDevices(*sys);
    EXPECT_TRUE(map && map->devices.size() == 1u);
    return map->devices.at(0);
  }
  TtmModules ttm() { return readTtmModules(*sys); }
  AmdgpuParams params() { return readAmdgpuParams(*sys); }
  KfdLimits limits(const TtmModules& t, const AmdgpuParams& p) {
    return kfdLimits({probes::parseKernelRelease(kernel), memTotal, &t, &p, kPage});
  }
  GttCeilings ceilings() {
    auto t = ttm();
    auto p = params();
    return gttCeilings(device(), t, limits(t, p));
  }
};

// gttsize=131072 alone: sysfs shows 128 GiB of GTT; ROCm's caps are the GTT
// manager (128 GiB), TTM's default pages_limit (16,777,216 pages of 4 KiB =
// 64 GiB) and KFD's system limit (124.5 GiB): 64 GiB, and headroom uses it.
TEST_F(GttCeilingTest, GttsizeAboveThePagesLimitRaisesGraphicsOnly) {
  host.setModuleParam("ttm", "pages_limit", "16777216");
  host.setModuleParam("amdgpu", "gttsize", "131072");
  host.addModuleHolder("ttm", "amdgpu");
  apu(128 * GiB, 10 * GiB);
  auto t = ttm();
  ASSERT_EQ(t.loaded.size(), 1u);
  EXPECT_EQ(t.loaded[0].pagesLimit, 16777216u);
  EXPECT_EQ(t.loaded[0].holders, std::vector<std::string>{"amdgpu"});
  auto c = ceilings();
  EXPECT_EQ(c.graphics.bytes, 128 * GiB);
  EXPECT_EQ(c.graphics.source, "mem_info_gtt_total (bytes)");
  EXPECT_EQ(c.compute.bytes, 64 * GiB);
  EXPECT_EQ(c.compute.source, "KFD TTM limit: ttm.pages_limit = 16777216 pages of 4096 bytes");
  ASSERT_EQ(c.computeTerms.size(), 3u);
  EXPECT_EQ(c.computeTerms[0].name, "GTT manager");
  EXPECT_EQ(c.computeTerms[0].value.bytes, 128 * GiB);
  EXPECT_EQ(c.computeTerms[2].value.bytes, kSystemLimit128);
  EXPECT_EQ(c.computeTerms[2].value.source,
            "MemTotal 128.0 GiB - MemTotal/64 - 1.5 GiB, KFD 6.7 and later");
  EXPECT_EQ(c.ttmModule, "ttm");
  EXPECT_EQ(c.ttmHow, "ttm lists amdgpu in /sys/module/ttm/holders");
  const char* which = nullptr;
  EXPECT_EQ(c.forConsumer(GttConsumer::Smaller, &which), 64 * GiB);
  EXPECT_STREQ(which, "compute");
  EXPECT_EQ(c.smallerInWords(), "the compute ceiling (the smaller)");
  EXPECT_EQ(c.forConsumer(GttConsumer::Graphics), 128 * GiB);
  EXPECT_EQ(gttHeadroom(device(), c, GttConsumer::Smaller, 100 * GiB), 54 * GiB);
  EXPECT_EQ(gttHeadroom(device(), c, GttConsumer::Graphics, 100 * GiB), 100 * GiB);  // MemAvailable
  EXPECT_EQ(gttHeadroom(device(), c, GttConsumer::Smaller, std::nullopt), std::nullopt);

  // The advice: gttsize (128 GiB) is above KFD's system limit, so the
  // pages_limit it suggests is that limit, 124.5 GiB / 4 KiB = 32,636,928
  // pages, never the 33,554,432 that 128 GiB would be.
  auto p = params();
  EXPECT_EQ(p.gttsizeMib, 131072);
  auto advice = gttAdvice(p, t, limits(t, p), kPage);
  ASSERT_TRUE(advice);
  EXPECT_EQ(*advice,
            "amdgpu.gttsize=131072 (128.0 GiB) is set: it is deprecated (the kernel asks for "
            "ttm.pages_limit). It sizes the GTT manager (mem_info_gtt_total), which caps graphics "
            "and ROCm alike; ROCm is also capped by the KFD TTM limit (64.0 GiB (ttm.pages_limit "
            "= 16777216 pages of 4096 bytes)) and the KFD system limit (124.5 GiB (MemTotal "
            "128.0 GiB - MemTotal/64 - 1.5 GiB, KFD 6.7 and later)). To give graphics and ROCm "
            "the same 124.5 GiB, set ttm.pages_limit=32636928 on the kernel command line (or "
            "'options ttm pages_limit=32636928' in /etc/modprobe.d/) and drop amdgpu.gttsize "
            "(that is the KFD system limit: ROCm never gets more, whatever the GTT size)");
  EXPECT_EQ(advice->find("33554432"), std::string::npos);
}

// gttsize=32768 (32 GiB) below a 96 GiB pages_limit: every TT placement,
// KFD's included, fails past the GTT manager's 32 GiB, so ROCm is capped at
// 32 GiB too ("ROCm does not see gttsize" is false here).
TEST_F(GttCeilingTest, GttsizeBelowThePagesLimitCapsRocmToo) {
  host.setModuleParam("ttm", "pages_limit", "25165824");
  host.setModuleParam("amdgpu", "gttsize", "32768");
  apu(32 * GiB, 0);
  auto c = ceilings();
  EXPECT_EQ(c.graphics.bytes, 32 * GiB);
  EXPECT_EQ(c.compute.bytes, 32 * GiB);
  EXPECT_EQ(c.compute.source, "GTT manager: mem_info_gtt_total (bytes)");
  EXPECT_EQ(c.computeTerms[1].value.bytes, 96 * GiB);
  auto t = ttm();
  auto p = params();
  auto advice = gttAdvice(p, t, limits(t, p), kPage);
  ASSERT_TRUE(advice);
  // 32 GiB / 4 KiB = 8,388,608 pages: the same ceiling for both, below KFD's limit.
  EXPECT_NE(advice->find("the same 32.0 GiB, set ttm.pages_limit=8388608 "), std::string::npos)
      << *advice;
  EXPECT_EQ(advice->find("that is the KFD system limit"), std::string::npos);
}

// pages_limit=33554432 (128 GiB) on a 128 GiB host, no gttsize: graphics may
// take 128 GiB, ROCm stops at KFD's system limit, 124.5 GiB. The advice says
// so and suggests that limit (32,636,928 pages), never more.
TEST_F(GttCeilingTest, APagesLimitAboveTheKfdSystemLimitStopsRocmThere) {
  host.setModuleParam("ttm", "pages_limit", "33554432");
  host.setModuleParam("amdgpu", "gttsize", "-1");
  apu(128 * GiB, 0);
  auto c = ceilings();
  EXPECT_EQ(c.graphics.bytes, 128 * GiB);
  EXPECT_EQ(c.compute.bytes, kSystemLimit128);
  EXPECT_EQ(c.compute.source,
            "KFD system limit: MemTotal 128.0 GiB - MemTotal/64 - 1.5 GiB, KFD 6.7 and later");
  auto t = ttm();
  auto p = params();
  auto advice = gttAdvice(p, t, limits(t, p), kPage);
  ASSERT_TRUE(advice);
  EXPECT_EQ(*advice,
            "ttm.pages_limit=33554432 (128.0 GiB) is above the KFD system limit (124.5 GiB "
            "(MemTotal 128.0 GiB - MemTotal/64 - 1.5 GiB, KFD 6.7 and later)): ROCm stops there "
            "while graphics may take up to 128.0 GiB. To give both the same ceiling, set "
            "ttm.pages_limit=32636928 on the kernel command line (or 'options ttm "
            "pages_limit=32636928' in /etc/modprobe.d/)");
}

// amdgpu.no_system_mem_limit=1 switches KFD's system limit off: the same
// host's compute ceiling is the 128 GiB pages_limit, and nothing is advised.
TEST_F(GttCeilingTest, NoSystemMemLimitLiftsKfdsSystemLimit) {
  host.setModuleParam("ttm", "pages_limit", "33554432");
  host.setModuleParam("amdgpu", "no_system_mem_limit", "Y");
  apu(128 * GiB, 0);
  auto c = ceilings();
  EXPECT_EQ(c.compute.bytes, 128 * GiB);
  EXPECT_FALSE(c.computeTerms[2].applies);
  EXPECT_EQ(c.computeTerms[2].value.source, "amdgpu.no_system_mem_limit=1: not applied");
  auto t = ttm();
  auto p = params();
  EXPECT_EQ(p.noSystemMemLimit, true);
  EXPECT_FALSE(gttAdvice(p, t, limits(t, p), kPage));
}

// Debian 12's 6.1: KFD's TTM limit was 3/8 of the RAM free when amdgpu
// loaded and pages_limit played no part; nothing read now can say it. The
// compute ceiling is unknown with that reason, and headroom uses graphics.
TEST_F(GttCeilingTest, Before65TheComputeCeilingIsUnknownWithTheReason) {
  kernel = "6.1.0-57-amd64";
  host.setModuleParam("ttm", "pages_limit", "16777216");
  apu(64 * GiB, 0);
  auto c = ceilings();
  EXPECT_FALSE(c.compute.bytes);
  EXPECT_EQ(c.compute.unknown,
            "unknown before 6.5 (this is 6.1.0-57-amd64): KFD used 3/8 of the RAM free when "
            "amdgpu loaded");
  EXPECT_EQ(c.computeTerms[2].value.unknown,
            "unknown before 6.7 (this is 6.1.0-57-amd64): KFD used 15/16 of the RAM free when "
            "amdgpu loaded");
  EXPECT_EQ(c.forConsumer(GttConsumer::Smaller), 64 * GiB);
  EXPECT_EQ(c.smallerInWords(), "the graphics ceiling (the only one known)");
  // 6.5 and 6.6: pages_limit counts, the system limit still came from free RAM.
  kernel = "6.6.30";
  c = ceilings();
  EXPECT_EQ(c.computeTerms[1].value.bytes, 64 * GiB);
  EXPECT_FALSE(c.compute.bytes);
  EXPECT_NE(c.compute.unknown->find("unknown before 6.7 (this is 6.6.30)"), std::string::npos);
  kernel = "not a release";
  c = ceilings();
  EXPECT_EQ(c.compute.unknown,
            "the kernel release is unknown, so which KFD limits apply is unknown");
}

// A small host: KFD halves MemTotal - MemTotal/64 instead of taking 1.5 GiB
// off when that would leave under 3 GiB: (2 GiB - 32 MiB) / 2 = 1008 MiB.
TEST_F(GttCeilingTest, KfdHalvesItsSystemLimitOnSmallHosts) {
  memTotal = 2 * GiB;
  host.setModuleParam("ttm", "pages_limit", "262144");  // 1 GiB
  apu(1 * GiB, 0);
  auto c = ceilings();
  EXPECT_EQ(c.computeTerms[2].value.bytes, 1008 * MiB);
  EXPECT_EQ(c.compute.bytes, 1008 * MiB);
}

// AMD's DKMS driver: ttm and amdttm both loaded, only amdttm serves amdgpu.
// ttm's pages_limit is someone else's (xe, say) and must not be used.
TEST_F(GttCeilingTest, TheTtmModuleHoldingAmdgpuIsUsed) {
  host.setModuleParam("ttm", "pages_limit", "4194304");
  host.addModuleHolder("ttm", "drm_ttm_helper");
  host.setModuleParam("amdttm", "pages_limit", "25165824");
  host.addModuleHolder("amdttm", "amdgpu");
  apu(96 * GiB, 0);
  auto c = ceilings();
  EXPECT_EQ(c.ttmModule, "amdttm");
  EXPECT_EQ(c.compute.bytes, 96 * GiB);
  EXPECT_EQ(c.computeTerms[1].value.source, "amdttm.pages_limit = 25165824 pages of 4096 bytes");
}

TEST_F(GttCeilingTest, NewerDkmsInstallsNameItAmdTtm) {
  host.setModuleParam("ttm", "pages_limit", "4194304");
  host.setModuleParam("amd_ttm", "pages_limit", "12582912");
  host.addModuleHolder("amd_ttm", "amdgpu");
  apu(96 * GiB, 0);
  auto t = ttm();
  ASSERT_EQ(t.loaded.size(), 2u);
  EXPECT_EQ(t.loaded[1].name, "amd_ttm");
  auto c = ceilings();
  EXPECT_EQ(c.ttmModule, "amd_ttm");
  EXPECT_EQ(c.compute.bytes, 48 * GiB);
}

// Two copies loaded and neither names amdgpu: no guess. The compute
// ceiling is absent with the reason, and headroom uses the one it knows.
TEST_F(GttCeilingTest, AmbiguousModulesGiveNoComputeCeiling) {
  host.setModuleParam("ttm", "pages_limit", "4194304");
  host.setModuleParam("amdttm", "pages_limit", "25165824");
  apu(96 * GiB, 16 * GiB);
  auto c = ceilings();
  EXPECT_FALSE(c.compute.bytes);
  EXPECT_EQ(*c.compute.unknown,
            "the TTM module serving amdgpu is unknown: ttm and amdttm are loaded and none lists "
            "amdgpu as a holder");
  const char* which = nullptr;
  EXPECT_EQ(c.forConsumer(GttConsumer::Smaller, &which), 96 * GiB);
  EXPECT_STREQ(which, "graphics");
  EXPECT_EQ(c.smallerInWords(), "the graphics ceiling (the only one known)");
  EXPECT_FALSE(c.forConsumer(GttConsumer::Compute));  // absent, so no headroom to delay with
}

// Hostile module parameters: garbage and an overflowing page count.
TEST_F(GttCeilingTest, UnreadablePagesLimitIsSaidNotGuessed) {
  host.setModuleParam("ttm", "pages_limit", "lots");
  apu(96 * GiB, 0);
  auto t = ttm();
  EXPECT_FALSE(t.loaded[0].pagesLimit);
  EXPECT_NE(t.loaded[0].pagesLimitUnknown->find("reads 'lots', not a page count"),
            std::string::npos);
  EXPECT_FALSE(ceilings().compute.bytes);
  host.setModuleParam("ttm", "pages_limit", "18446744073709551615");
  auto c = ceilings();
  EXPECT_FALSE(c.compute.bytes);
  EXPECT_EQ(c.compute.unknown, "pages_limit x page size overflows");
}

// Found on every kernel of the VM matrix: ttm.pages_limit reads 0 until the
// first device using TTM initialises (ttm_tt_mgr_init fills in the default).
// 0 is "not set yet", never a ceiling of 0 bytes.
TEST_F(GttCeilingTest, PagesLimitZeroIsNotYetSetNeverACeiling) {
  host.setModuleParam("ttm", "pages_limit", "0");
  apu(96 * GiB, 0);
  auto t = ttm();
  EXPECT_FALSE(t.loaded[0].pagesLimit);
  EXPECT_NE(t.loaded[0].pagesLimitUnknown->find("reads 0: no device using ttm has initialised yet"),
            std::string::npos)
      << *t.loaded[0].pagesLimitUnknown;
  auto c = ceilings();
  EXPECT_FALSE(c.compute.bytes);
  EXPECT_EQ(c.forConsumer(GttConsumer::Smaller), 96 * GiB);  // graphics, the only one known
}

// Other drivers have no KFD: only the graphics ceiling, when sysfs has one.
TEST_F(GttCeilingTest, NonAmdDevicesHaveNoComputeCeiling) {
  host.setModuleParam("ttm", "pages_limit", "4194304");
  host.addDevice({"0000:03:00.0", "xe", {0, 128}, {}, true});
  sys.emplace(std::move(*fs::Root::open(host.sysRoot())));
  auto c = ceilings();
  EXPECT_FALSE(c.graphics.bytes);
  EXPECT_EQ(c.graphics.unknown, "the device exports no mem_info_gtt_total");
  EXPECT_EQ(c.compute.unknown,
            "no compute (KFD) ceiling: that is amdgpu's, and this device's driver is xe");
  EXPECT_TRUE(c.computeTerms.empty());
  EXPECT_FALSE(c.forConsumer(GttConsumer::Smaller));
  EXPECT_EQ(c.smallerInWords(), "");
}

// Where ROCm's hipMalloc memory lives: GTT on an APU whose carve-out is
// smaller than its GTT (apu_prefer_gtt) from about 6.10, the carve-out on
// older kernels and where the carve-out is the larger.
TEST_F(GttCeilingTest, RocmPlacementFollowsTheKernelsApuPreferGttTest) {
  apu(64 * GiB, 0, 512 * MiB);
  auto kernel612 = probes::parseKernelRelease("6.12.117+deb12-amd64");
  auto p = rocmPlacement(device(), kernel612);
  EXPECT_EQ(p.where, RocmPlacement::Where::Gtt);
  EXPECT_EQ(p.evidence,
            "mem_info_vram_total 512.0 MiB < mem_info_gtt_total 64.0 GiB: on an APU the kernel "
            "places ROCm's VRAM-flagged memory in GTT (apu_prefer_gtt)");
  EXPECT_EQ(rocmPlacement(device(), probes::parseKernelRelease("6.1.0-57-amd64")).where,
            RocmPlacement::Where::Vram);
  DrmDevice bigCarveOut = device();
  bigCarveOut.memory = {{"gtt", 30 * GiB, 0}, {"vram", 96 * GiB, 0}};
  EXPECT_EQ(rocmPlacement(bigCarveOut, kernel612).where, RocmPlacement::Where::Vram);
  DrmDevice xe = device();
  xe.driver = "xe";
  EXPECT_EQ(rocmPlacement(xe, kernel612).where, RocmPlacement::Where::Unknown);
  DrmDevice noFigures = device();
  noFigures.memory.clear();
  EXPECT_EQ(rocmPlacement(noFigures, kernel612).where, RocmPlacement::Where::Unknown);
}

TEST(KernelRelease, DebianReleasesAndHostileText) {
  auto r = probes::parseKernelRelease("6.12.117+deb12-amd64\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->major, 6u);
  EXPECT_EQ(r->minor, 12u);
  EXPECT_EQ(r->patch, 117u);
  EXPECT_EQ(r->text, "6.12.117+deb12-amd64");
  EXPECT_TRUE(r->atLeast(6, 7));
  EXPECT_FALSE(r->atLeast(6, 13));
  EXPECT_TRUE(r->atLeast(5, 99));
  auto seven = probes::parseKernelRelease("7.3.4-amd64");
  ASSERT_TRUE(seven);
  EXPECT_TRUE(seven->atLeast(6, 10));
  auto noPatch = probes::parseKernelRelease("6.5-rc2");
  ASSERT_TRUE(noPatch);
  EXPECT_EQ(noPatch->patch, 0u);
  for (const char* bad : {"", "6", "6.", ".6", "x6.1", "999999.1", "6.1234567", "-6.1"})
    EXPECT_FALSE(probes::parseKernelRelease(bad)) << bad;
}

TEST(GttConsumerNames, RoundTripAndRefuseTheRest) {
  for (auto c : {GttConsumer::Smaller, GttConsumer::Graphics, GttConsumer::Compute})
    EXPECT_EQ(parseGttConsumer(gttConsumerName(c)), c);
  EXPECT_FALSE(parseGttConsumer("Compute"));
  EXPECT_FALSE(parseGttConsumer(""));
}

}  // namespace
}  // namespace tally::devices
