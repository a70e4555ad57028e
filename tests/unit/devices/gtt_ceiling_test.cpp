// The two GTT ceilings (graphics, compute) and the TTM module that serves a
// device, on synthetic sysfs trees shaped like the kernel's.
#include "devices/gtt_ceiling.h"

#include <gtest/gtest.h>

#include "support/fake_host.h"

namespace tally::devices {
namespace {

using namespace tally::testing;

constexpr std::uint64_t GiB = 1ULL << 30;
constexpr std::uint64_t kPage = 4096;

struct GttCeilingTest : ::testing::Test {
  FakeHost host;
  std::optional<fs::Root> sys;

  // A Strix Halo with 128 GiB of RAM: amdgpu's GTT domain as sysfs shows it,
  // TTM's pages_limit as the kernel defaulted or was told.
  void apu(std::uint64_t gttTotal, std::uint64_t gttUsed) {
    host.addDevice({"0000:c6:00.0",
                    "amdgpu",
                    {1, 128},
                    {{"gtt_total", gttTotal}, {"gtt_used", gttUsed}},
                    true});
    sys.emplace(std::move(*fs::Root::open(host.sysRoot())));
  }
  DrmDevice device() {
    auto map = discoverDrmDevices(*sys);
    EXPECT_TRUE(map && map->devices.size() == 1u);
    return map->devices.at(0);
  }
};

// gttsize=131072 alone: sysfs shows 128 GiB of GTT, but ROCm's ceiling is
// the default pages_limit (RAM/2 = 16,777,216 pages of 4 KiB = 64 GiB), and
// headroom is measured against it.
TEST_F(GttCeilingTest, GttsizeRaisesGraphicsOnlyAndHeadroomUsesTheSmaller) {
  host.setModuleParam("ttm", "pages_limit", "16777216");
  host.setModuleParam("amdgpu", "gttsize", "131072");
  host.addModuleHolder("ttm", "amdgpu");
  apu(128 * GiB, 10 * GiB);
  auto ttm = readTtmModules(*sys);
  ASSERT_EQ(ttm.loaded.size(), 1u);
  EXPECT_EQ(ttm.loaded[0].pagesLimit, 16777216u);
  EXPECT_EQ(ttm.loaded[0].holders, std::vector<std::string>{"amdgpu"});
  auto c = gttCeilings(device(), ttm, kPage);
  EXPECT_EQ(c.graphics.bytes, 128 * GiB);
  EXPECT_EQ(c.graphics.source, "mem_info_gtt_total (bytes)");
  EXPECT_EQ(c.compute.bytes, 64 * GiB);
  EXPECT_EQ(c.compute.source, "ttm.pages_limit = 16777216 pages of 4096 bytes");
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

  auto g = readAmdgpuGttsize(*sys);
  EXPECT_EQ(g.mib, 131072);
  auto advice = gttsizeAdvice(g, ttm, kPage);
  ASSERT_TRUE(advice);
  EXPECT_EQ(*advice,
            "amdgpu.gttsize=131072 is set: it is deprecated (the kernel asks for "
            "ttm.pages_limit) and ROCm does not see it: ROCm's GTT ceiling is 64.0 GiB "
            "(ttm.pages_limit = 16777216 pages). To give graphics and ROCm the same 128.0 GiB, "
            "set ttm.pages_limit=33554432 on the kernel command line (or 'options ttm "
            "pages_limit=33554432' in /etc/modprobe.d/) and drop amdgpu.gttsize");
}

// The recommended setup: pages_limit raised, no gttsize; both ceilings agree.
TEST_F(GttCeilingTest, PagesLimitAloneGivesBothTheSameCeiling) {
  host.setModuleParam("ttm", "pages_limit", "25165824");
  host.setModuleParam("amdgpu", "gttsize", "-1");
  apu(96 * GiB, 0);
  auto ttm = readTtmModules(*sys);
  auto c = gttCeilings(device(), ttm, kPage);
  EXPECT_EQ(c.graphics.bytes, 96 * GiB);
  EXPECT_EQ(c.compute.bytes, 96 * GiB);
  EXPECT_EQ(c.ttmHow, "ttm is the only TTM module loaded");  // built in: no holders
  EXPECT_EQ(c.smallerInWords(), "the graphics ceiling (the two are equal)");
  EXPECT_FALSE(gttsizeAdvice(readAmdgpuGttsize(*sys), ttm, kPage));  // -1 = auto: nothing to say
}

// AMD's DKMS driver: ttm and amdttm both loaded, only amdttm serves amdgpu.
// ttm's pages_limit is someone else's (xe, say) and must not be used.
TEST_F(GttCeilingTest, TheTtmModuleHoldingAmdgpuIsUsed) {
  host.setModuleParam("ttm", "pages_limit", "4194304");
  host.addModuleHolder("ttm", "drm_ttm_helper");
  host.setModuleParam("amdttm", "pages_limit", "25165824");
  host.addModuleHolder("amdttm", "amdgpu");
  apu(96 * GiB, 0);
  auto c = gttCeilings(device(), readTtmModules(*sys), kPage);
  EXPECT_EQ(c.ttmModule, "amdttm");
  EXPECT_EQ(c.compute.bytes, 96 * GiB);
  EXPECT_EQ(c.compute.source, "amdttm.pages_limit = 25165824 pages of 4096 bytes");
}

TEST_F(GttCeilingTest, NewerDkmsInstallsNameItAmdTtm) {
  host.setModuleParam("ttm", "pages_limit", "4194304");
  host.setModuleParam("amd_ttm", "pages_limit", "12582912");
  host.addModuleHolder("amd_ttm", "amdgpu");
  apu(48 * GiB, 0);
  auto ttm = readTtmModules(*sys);
  ASSERT_EQ(ttm.loaded.size(), 2u);
  EXPECT_EQ(ttm.loaded[1].name, "amd_ttm");
  auto c = gttCeilings(device(), ttm, kPage);
  EXPECT_EQ(c.ttmModule, "amd_ttm");
  EXPECT_EQ(c.compute.bytes, 48 * GiB);
}

// Two copies loaded and neither names amdgpu: no guess. The compute
// ceiling is absent with the reason, and headroom uses the one it knows.
TEST_F(GttCeilingTest, AmbiguousModulesGiveNoComputeCeiling) {
  host.setModuleParam("ttm", "pages_limit", "4194304");
  host.setModuleParam("amdttm", "pages_limit", "25165824");
  apu(96 * GiB, 16 * GiB);
  auto c = gttCeilings(device(), readTtmModules(*sys), kPage);
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
  auto ttm = readTtmModules(*sys);
  EXPECT_FALSE(ttm.loaded[0].pagesLimit);
  EXPECT_NE(ttm.loaded[0].pagesLimitUnknown->find("reads 'lots', not a page count"),
            std::string::npos);
  auto c = gttCeilings(device(), ttm, kPage);
  EXPECT_FALSE(c.compute.bytes);
  host.setModuleParam("ttm", "pages_limit", "18446744073709551615");
  c = gttCeilings(device(), readTtmModules(*sys), kPage);
  EXPECT_FALSE(c.compute.bytes);
  EXPECT_EQ(c.compute.unknown, "pages_limit x page size overflows");
}

// Found on every kernel of the VM matrix: ttm.pages_limit reads 0 until the
// first device using TTM initialises (ttm_tt_mgr_init fills in the default).
// 0 is "not set yet", never a ceiling of 0 bytes.
TEST_F(GttCeilingTest, PagesLimitZeroIsNotYetSetNeverACeiling) {
  host.setModuleParam("ttm", "pages_limit", "0");
  apu(96 * GiB, 0);
  auto ttm = readTtmModules(*sys);
  EXPECT_FALSE(ttm.loaded[0].pagesLimit);
  EXPECT_NE(
      ttm.loaded[0].pagesLimitUnknown->find("reads 0: no device using ttm has initialised yet"),
      std::string::npos)
      << *ttm.loaded[0].pagesLimitUnknown;
  auto c = gttCeilings(device(), ttm, kPage);
  EXPECT_FALSE(c.compute.bytes);
  EXPECT_EQ(c.forConsumer(GttConsumer::Smaller), 96 * GiB);  // graphics, the only one known
}

// Other drivers have no KFD: only the graphics ceiling, when sysfs has one.
TEST_F(GttCeilingTest, NonAmdDevicesHaveNoComputeCeiling) {
  host.setModuleParam("ttm", "pages_limit", "4194304");
  host.addDevice({"0000:03:00.0", "xe", {0, 128}, {}, true});
  sys.emplace(std::move(*fs::Root::open(host.sysRoot())));
  auto c = gttCeilings(device(), readTtmModules(*sys), kPage);
  EXPECT_FALSE(c.graphics.bytes);
  EXPECT_EQ(c.graphics.unknown, "the device exports no mem_info_gtt_total");
  EXPECT_EQ(c.compute.unknown,
            "no compute (KFD) ceiling: that is amdgpu's, and this device's driver is xe");
  EXPECT_FALSE(c.forConsumer(GttConsumer::Smaller));
  EXPECT_EQ(c.smallerInWords(), "");
}

TEST(GttConsumerNames, RoundTripAndRefuseTheRest) {
  for (auto c : {GttConsumer::Smaller, GttConsumer::Graphics, GttConsumer::Compute})
    EXPECT_EQ(parseGttConsumer(gttConsumerName(c)), c);
  EXPECT_FALSE(parseGttConsumer("Compute"));
  EXPECT_FALSE(parseGttConsumer(""));
}

}  // namespace
}  // namespace tally::devices
