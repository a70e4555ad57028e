#include "daemon/headroom.h"

#include <gtest/gtest.h>

#include "rpc/protocol.h"

namespace tally {
namespace {

using rpc::LineReader;

TEST(Headroom, HoldersUnusedDeclarationsAreStillPromised) {
  constexpr std::uint64_t GiB = 1ULL << 30;
  config::Pool pool{"gpu", 4, 64 * GiB, 96 * GiB, {"0000:c6:00.0"}};
  daemon::HostFigures host;
  host.memAvailable = 100 * GiB;
  devices::DrmDevice apu;
  apu.key = "0000:c6:00.0";
  apu.pdev = "0000:c6:00.0";
  apu.memory = {{"gtt", 120 * GiB, 50 * GiB}, {"vram", 512ULL << 20, 512ULL << 20}};
  devices::DrmDevice other;
  other.key = "0000:03:00.0";
  other.pdev = "0000:03:00.0";
  other.memory = {{"vram", 16 * GiB, 0}};
  host.devices.devices = {other, apu};
  EXPECT_EQ(daemon::deviceFree(pool, host.devices), 70 * GiB);  // only the pool's device
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
  daemon::HostFigures none;
  auto unknown = daemon::poolHeadroom(pool, none, {});
  EXPECT_FALSE(unknown.hostBytes);
  EXPECT_FALSE(unknown.gpuBytes);
  config::Pool anyDevice{"any", 1, std::nullopt, 8 * GiB, {}};
  EXPECT_EQ(daemon::deviceFree(anyDevice, host.devices),
            86 * GiB);  // every device that exports figures
}

}  // namespace
}  // namespace tally
