// The kernel charge's maps sized from the host and the daemon's limits
// (bpf/sizing.h): room grows with the box's GPU memory and what the daemon
// admits, within fixed floors and ceilings, and one lease's object quota
// never exceeds the map it shares.
#include "bpf/sizing.h"

#include <gtest/gtest.h>

namespace tally {
namespace {

constexpr std::uint64_t GiB = 1ULL << 30;

TEST(MapSizing, ObjectsGrowWithTheBoxsGpuMemoryBetweenAFloorAndACeiling) {
  // A Strix Halo box: 96 GiB of GTT and a 512 MiB carve-out -> 97 GiB, rounded up.
  auto s = bpf::sizeMaps(96 * GiB + (512ULL << 20), 0, 0);
  EXPECT_EQ(s.objects, 97 * bpf::kObjectsPerGiB);
  // Unknown (no device exports mem_info_*) or small: the floor.
  EXPECT_EQ(bpf::sizeMaps(std::nullopt, 0, 0).objects, bpf::kMinObjects);
  EXPECT_EQ(bpf::sizeMaps(8 * GiB, 0, 0).objects, bpf::kMinObjects);
  // Absurd figures neither wrap nor pass the ceiling.
  EXPECT_EQ(bpf::sizeMaps(~0ULL, 0, 0).objects, bpf::kMaxObjects);
  EXPECT_EQ(bpf::sizeMaps(4096 * GiB, 0, 0).objects, bpf::kMaxObjects);
}

TEST(MapSizing, LeasesGrowWithWhatTheDaemonAdmits) {
  EXPECT_EQ(bpf::sizeMaps(std::nullopt, 0, 0).leases, bpf::kMinLeases);
  // The default max_queued (16,384) and two pools of 4.
  EXPECT_EQ(bpf::sizeMaps(std::nullopt, 16384 + 8, 0).leases,
            (16384 + 8) * bpf::kLeaseSlotsPerWaiter);
  EXPECT_EQ(bpf::sizeMaps(std::nullopt, ~0ULL, 0).leases, bpf::kMaxLeases);
}

TEST(MapSizing, OneLeasesQuotaIsTheConfigsAndNeverMoreThanTheMap) {
  EXPECT_EQ(bpf::sizeMaps(std::nullopt, 0, 0).objectsPerLease, bpf::kDefaultObjectsPerLease);
  EXPECT_EQ(bpf::sizeMaps(std::nullopt, 0, 4096).objectsPerLease, 4096u);
  EXPECT_EQ(bpf::sizeMaps(std::nullopt, 0, 1ULL << 40).objectsPerLease, bpf::kMinObjects);
}

}  // namespace
}  // namespace tally
