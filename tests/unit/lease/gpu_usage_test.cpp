// The GPU bound (enforce/gpu_bound) and the figure it is decided on
// (lease/gpu_usage): exact decisions for sample sequences, exact bytes for
// shared buffers, KFD and incomplete clients.
#include "lease/gpu_usage.h"

#include <gtest/gtest.h>
#include <signal.h>

#include "enforce/gpu_bound.h"

namespace tally {
namespace {

using enforce::Action;
using enforce::Verdict;
constexpr std::uint64_t GiB = 1ULL << 30;
constexpr std::uint64_t MiB = 1ULL << 20;

report::RegionMap client(
    std::initializer_list<
        std::tuple<const char*, std::optional<std::uint64_t>, std::optional<std::uint64_t>>>
        regions) {
  report::RegionMap m;
  for (const auto& [name, resident, shared] : regions) {
    report::RegionSums s;
    s.resident.add(resident);
    s.shared.add(shared);
    m.emplace(name, s);
  }
  return m;
}

TEST(LeaseGpuUsage, ABufferSharedBetweenTwoClientsOfTheLeaseCountsOnce) {
  // Client A: 6 GiB GTT of which 2 GiB exported; client B imported those 2 GiB and has 1 GiB of its
  // own.
  auto u = lease::leaseGpuUsage({client({{"gtt", 6 * GiB, 2 * GiB}, {"vram", 256 * MiB, 0}}),
                                 client({{"gtt", 3 * GiB, 2 * GiB}, {"vram", 0, 0}})},
                                std::nullopt);
  EXPECT_EQ(u.regions["gtt"], 7 * GiB);
  EXPECT_EQ(u.regions["vram"], 256 * MiB);
  EXPECT_EQ(u.bytes, 7 * GiB + 256 * MiB);
  EXPECT_EQ(u.sharedCountedOnce, 2 * GiB);
  EXPECT_EQ(u.source, "drm-fdinfo");
}

TEST(LeaseGpuUsage, NeverBelowTheLargestClientNorAboveTheSum) {
  // Shared figures larger than resident (shared but evicted buffers) are capped at resident.
  auto u = lease::leaseGpuUsage(
      {client({{"gtt", GiB, 5 * GiB}}), client({{"gtt", 4 * GiB, 4 * GiB}})}, std::nullopt);
  EXPECT_EQ(u.regions["gtt"], 4 * GiB);
  auto one = lease::leaseGpuUsage({client({{"gtt", 3 * GiB, std::nullopt}})}, std::nullopt);
  EXPECT_EQ(one.bytes, 3 * GiB);
  EXPECT_EQ(one.sharedCountedOnce, 0u);
}

TEST(LeaseGpuUsage, KfdSuppliesVramThatFdinfoLacks) {
  auto u = lease::leaseGpuUsage({client({{"gtt", GiB, 0}, {"vram", 0, 0}})}, 12 * GiB);
  EXPECT_EQ(u.regions["vram"], 12 * GiB);
  EXPECT_EQ(u.bytes, 13 * GiB);
  EXPECT_EQ(u.source, "drm-fdinfo+kfd-sysfs");
  // fdinfo already shows it (same buffers): not added twice.
  auto same = lease::leaseGpuUsage({client({{"vram", 12 * GiB, 0}})}, 12 * GiB);
  EXPECT_EQ(same.bytes, 12 * GiB);
  EXPECT_EQ(same.source, "drm-fdinfo");
  auto onlyKfd = lease::leaseGpuUsage({}, 2 * GiB);
  EXPECT_EQ(onlyKfd.bytes, 2 * GiB);
}

TEST(LeaseGpuUsage, AClientWithoutAResidentFigureMakesTheSumAbsent) {
  auto u = lease::leaseGpuUsage(
      {client({{"gtt", 3 * GiB, 0}}), client({{"gtt", std::nullopt, std::nullopt}})}, std::nullopt);
  EXPECT_FALSE(u.bytes);
  EXPECT_FALSE(u.regions.count("gtt"));  // a partial figure is not shown as the region's
  // Outside the counted regions an unknown figure does not spoil the sum.
  auto cpu = lease::leaseGpuUsage({client({{"gtt", GiB, 0}, {"cpu", std::nullopt, std::nullopt}})},
                                  std::nullopt);
  EXPECT_EQ(cpu.bytes, GiB);
  EXPECT_TRUE(
      lease::leaseGpuUsage({}, std::nullopt).bytes);  // no clients: 0 bytes measured, not unknown
  EXPECT_EQ(*lease::leaseGpuUsage({}, std::nullopt).bytes, 0u);
}

}  // namespace
}  // namespace tally
