#include "daemon/headroom.h"

#include <gtest/gtest.h>

#include "rpc/protocol.h"

namespace tally {
namespace {

using rpc::LineReader;

// A host snapshot as readSnapshot() would make it on a 6.12 kernel: KFD's
// limits follow from the TTM modules and MemTotal set afterwards.
void settle(host::Snapshot& h) {
  h.kernel = probes::parseKernelRelease("6.12.117+deb12-amd64");
  h.kfdLimits = devices::kfdLimits({h.kernel, h.meminfo.memTotal, &h.ttm, &h.amdgpu, h.pageSize});
}

TEST(Headroom, HoldersUnusedDeclarationsAreStillPromised) {
  constexpr std::uint64_t GiB = 1ULL << 30;
  config::Pool pool{"gpu", 4, 64 * GiB, 96 * GiB, {"0000:c6:00.0"}};
  host::Snapshot host;
  host.meminfo.memAvailable = 100 * GiB;
  devices::DrmDevice apu;
  apu.key = "0000:c6:00.0";
  apu.pdev = "0000:c6:00.0";
  apu.memory = {{"gtt", 120 * GiB, 50 * GiB}, {"vram", 512ULL << 20, 512ULL << 20}};
  devices::DrmDevice other;
  other.key = "0000:03:00.0";
  other.pdev = "0000:03:00.0";
  other.memory = {{"vram", 16 * GiB, 0}};
  host.devices.devices = {other, apu};
  EXPECT_EQ(daemon::deviceFree(pool, host), 70 * GiB);  // only the pool's device
  // A holder declared 48 GiB and uses 40: 8 more are promised to it.
  std::vector<daemon::HolderUse> holders = {{16 * GiB, 10 * GiB, 48 * GiB, 40 * GiB}};
  auto h = daemon::poolHeadroom(pool, host, holders);
  EXPECT_EQ(h.hostBytes, 94 * GiB);  // 100 - (16 - 10)
  EXPECT_EQ(h.gpuBytes, 62 * GiB);   // min(70, 100) - 8
  // Unknown use keeps the whole declaration; nothing goes below zero.
  holders.push_back({std::nullopt, std::nullopt, 90 * GiB, std::nullopt});
  h = daemon::poolHeadroom(pool, host, holders);
  EXPECT_EQ(h.gpuBytes, 0u);
  // No figures: absent, never 0.
  host::Snapshot none;
  auto unknown = daemon::poolHeadroom(pool, none, {});
  EXPECT_FALSE(unknown.hostBytes);
  EXPECT_FALSE(unknown.gpuBytes);
  config::Pool anyDevice{"any", 1, std::nullopt, 8 * GiB, {}};
  EXPECT_EQ(daemon::deviceFree(anyDevice, host),
            86 * GiB);  // every device that exports figures
}

// gttsize=131072 on a 128 GiB Strix Halo: sysfs says 128 GiB of GTT, ROCm's
// ceiling is TTM's default pages_limit (RAM/2, 62.5 GiB here). A pool's GPU
// headroom is measured against the smaller, unless the pool names its
// consumer; ttm and amdttm both loaded, only amdttm serves amdgpu.
TEST(Headroom, GttFreeIsMeasuredAgainstTheCeilingThePoolsWorkloadsUse) {
  constexpr std::uint64_t GiB = 1ULL << 30;
  host::Snapshot host;
  host.meminfo.memAvailable = 100 * GiB;
  host.pageSize = 4096;
  devices::DrmDevice apu;
  apu.driver = "amdgpu";
  apu.key = "0000:c6:00.0";
  apu.pdev = apu.key;
  apu.memory = {{"gtt", 128 * GiB, 50 * GiB}};
  host.devices.devices = {apu};
  host.ttm.loaded = {{"ttm", 8 * 262144, std::nullopt, {"drm_ttm_helper"}, std::nullopt},
                     {"amdttm", 16384000, std::nullopt, {"amdgpu"}, std::nullopt}};
  host.meminfo.memTotal = 128 * GiB;  // KFD's system limit 124.5 GiB: not the smallest
  settle(host);
  config::Pool pool{"gpu", 4, std::nullopt, 96 * GiB, {}};
  EXPECT_EQ(daemon::deviceFree(pool, host), 62 * GiB + 512 * (GiB >> 10) - 50 * GiB);
  pool.gttCeiling = devices::GttConsumer::Graphics;
  EXPECT_EQ(daemon::deviceFree(pool, host), 78 * GiB);
  pool.gttCeiling = devices::GttConsumer::Compute;
  EXPECT_EQ(daemon::deviceFree(pool, host), 62 * GiB + 512 * (GiB >> 10) - 50 * GiB);
  // Over the compute ceiling already: nothing free, never negative.
  host.devices.devices[0].memory = {{"gtt", 128 * GiB, 70 * GiB}};
  pool.gttCeiling = devices::GttConsumer::Smaller;
  EXPECT_EQ(daemon::deviceFree(pool, host), 0u);
}

// What a pool's devices hold in all: the pool's GTT ceiling plus VRAM, per
// device; a device whose GTT ceiling or VRAM size is unknown leaves the total
// unknown (an undercount would refuse a request that fits).
TEST(Headroom, TotalsAreMemTotalAndEachDevicesCeilingPlusVram) {
  constexpr std::uint64_t GiB = 1ULL << 30;
  host::Snapshot host;
  host.meminfo.memTotal = 128 * GiB;
  host.pageSize = 4096;
  devices::DrmDevice apu;
  apu.driver = "amdgpu";
  apu.key = "0000:c6:00.0";
  apu.pdev = apu.key;
  apu.memory = {{"gtt", 96 * GiB, 10 * GiB}, {"vram", 512 * (GiB >> 10), 0}};
  host.devices.devices = {apu};
  host.ttm.loaded = {{"ttm", 64 * 262144, std::nullopt, {"amdgpu"}, std::nullopt}};  // 64 GiB
  settle(host);
  config::Pool pool{"gpu", 4, std::nullopt, 96 * GiB, {}};
  auto t = daemon::poolTotals(pool, host);
  EXPECT_EQ(t.hostBytes, 128 * GiB);
  EXPECT_EQ(t.gpuBytes, 64 * GiB + 512 * (GiB >> 10));  // the smaller GTT ceiling: compute
  pool.gttCeiling = devices::GttConsumer::Graphics;
  EXPECT_EQ(daemon::poolTotals(pool, host).gpuBytes, 96 * GiB + 512 * (GiB >> 10));
  host.devices.devices[0].memory = {{"vram", std::nullopt, std::nullopt},
                                    {"gtt", 96 * GiB, 10 * GiB}};
  EXPECT_FALSE(daemon::poolTotals(pool, host).gpuBytes);
  config::Pool elsewhere{"gpu", 4, std::nullopt, 96 * GiB, {"0000:03:00.0"}};
  EXPECT_FALSE(daemon::poolTotals(elsewhere, host).gpuBytes);  // no device of the pool here
}

}  // namespace
}  // namespace tally
