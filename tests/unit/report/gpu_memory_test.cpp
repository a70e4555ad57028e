// The one counting rule (report/gpu_memory): exact bytes for shared
// buffers, KFD, incomplete clients, and the memory classes each driver's
// regions belong to (devices/memory_class).
#include "report/gpu_memory.h"

#include <gtest/gtest.h>

namespace tally {
namespace {

using devices::MemoryClass;
constexpr std::uint64_t GiB = 1ULL << 30;
constexpr std::uint64_t MiB = 1ULL << 20;

using Region = std::tuple<const char*, std::optional<std::uint64_t>, std::optional<std::uint64_t>>;

// One client's regions as `driver` printed them (amdgpu unless named).
report::RegionMap client(std::initializer_list<Region> regions, const char* driver = "amdgpu") {
  report::RegionMap m;
  for (const auto& [name, resident, shared] : regions) {
    report::RegionSums s;
    s.resident.add(resident);
    s.shared.add(shared);
    s.cls = devices::classifyRegion(driver, name);
    m.emplace(name, s);
  }
  return m;
}

report::GpuMemory count(const std::vector<report::RegionMap>& clients,
                        std::optional<std::uint64_t> kfd) {
  std::vector<const report::RegionMap*> maps;
  for (const auto& c : clients) maps.push_back(&c);
  return report::countGpuMemory(maps, kfd);
}

TEST(GpuMemory, ABufferSharedBetweenTwoClientsOfTheLeaseCountsOnce) {
  // Client A: 6 GiB GTT of which 2 GiB exported; client B imported those 2 GiB and has 1 GiB of its
  // own.
  auto u = count({client({{"gtt", 6 * GiB, 2 * GiB}, {"vram", 256 * MiB, 0}}),
                  client({{"gtt", 3 * GiB, 2 * GiB}, {"vram", 0, 0}})},
                 std::nullopt);
  EXPECT_EQ(u.regions["gtt"], 7 * GiB);
  EXPECT_EQ(u.regions["vram"], 256 * MiB);
  EXPECT_EQ(u.bytes, 7 * GiB + 256 * MiB);
  EXPECT_EQ(u.sharedCountedOnce, 2 * GiB);
  EXPECT_EQ(u.source, "drm-fdinfo");
}

TEST(GpuMemory, NeverBelowTheLargestClientNorAboveTheSum) {
  // Shared figures larger than resident (shared but evicted buffers) are capped at resident.
  auto u =
      count({client({{"gtt", GiB, 5 * GiB}}), client({{"gtt", 4 * GiB, 4 * GiB}})}, std::nullopt);
  EXPECT_EQ(u.regions["gtt"], 4 * GiB);
  auto one = count({client({{"gtt", 3 * GiB, std::nullopt}})}, std::nullopt);
  EXPECT_EQ(one.bytes, 3 * GiB);
  EXPECT_EQ(one.sharedCountedOnce, 0u);
}

TEST(GpuMemory, KfdSuppliesVramThatFdinfoLacks) {
  auto u = count({client({{"gtt", GiB, 0}, {"vram", 0, 0}})}, 12 * GiB);
  EXPECT_EQ(u.regions["vram"], 12 * GiB);
  EXPECT_EQ(u.bytes, 13 * GiB);
  EXPECT_EQ(u.source, "drm-fdinfo+kfd-sysfs");
  // fdinfo already shows it (same buffers): not added twice.
  auto same = count({client({{"vram", 12 * GiB, 0}})}, 12 * GiB);
  EXPECT_EQ(same.bytes, 12 * GiB);
  EXPECT_EQ(same.source, "drm-fdinfo");
  auto onlyKfd = count({}, 2 * GiB);
  EXPECT_EQ(onlyKfd.bytes, 2 * GiB);
}

TEST(GpuMemory, AClientWithoutAResidentFigureMakesTheSumAbsent) {
  auto u = count({client({{"gtt", 3 * GiB, 0}}), client({{"gtt", std::nullopt, std::nullopt}})},
                 std::nullopt);
  EXPECT_FALSE(u.bytes);
  EXPECT_FALSE(u.regions.count("gtt"));  // a partial figure is not shown as the region's
  EXPECT_EQ(u.unknown, "a client printed gtt without a resident figure");
  // Outside the counted classes an unknown figure does not spoil the sum
  // (amdgpu's gds is other); inside them it does (amdgpu's cpu is TTM pages).
  auto gds = count({client({{"gtt", GiB, 0}, {"gds", std::nullopt, std::nullopt}})}, std::nullopt);
  EXPECT_EQ(gds.bytes, GiB);
  auto cpu = count({client({{"gtt", GiB, 0}, {"cpu", std::nullopt, std::nullopt}})}, std::nullopt);
  EXPECT_FALSE(cpu.bytes);
  EXPECT_TRUE(count({}, std::nullopt).bytes);  // no clients: 0 bytes measured, not unknown
  EXPECT_EQ(*count({}, std::nullopt).bytes, 0u);
}

// xe's VRAM is vram0 and counts; its gtt and system are TTM pages and count.
// i915's system0 is shmem, already in memory.current: shown, never added.
// v3d's and the NPU's `memory` likewise; a driver not in the table is shown
// as unknown and not guessed into the sum.
TEST(GpuMemory, EachDriversRegionsCountByTheirClass) {
  auto xe =
      count({client({{"gtt", 192 * 1024, 0}, {"vram0", 23 * MiB, 0}, {"stolen", 0, 0}}, "xe")},
            std::nullopt);
  EXPECT_EQ(xe.bytes, 192 * 1024 + 23 * MiB);
  EXPECT_EQ(xe.hostUncharged, 192u * 1024);
  EXPECT_EQ(xe.classes["vram0"], MemoryClass::Device);
  EXPECT_EQ(xe.classes["stolen"], MemoryClass::Other);
  auto i915 = count({client({{"system0", 6044 * 1024, 0}, {"stolen-system0", 0, 0}}, "i915")},
                    std::nullopt);
  EXPECT_EQ(i915.bytes, 0u);
  EXPECT_EQ(i915.regions["system0"], 6044u * 1024);  // shown
  EXPECT_EQ(i915.classes["system0"], MemoryClass::HostCharged);
  auto v3d = count({client({{"memory", 3520 * 1024, std::nullopt}}, "v3d")}, std::nullopt);
  EXPECT_EQ(v3d.bytes, 0u);
  auto mystery = count({client({{"gtt", GiB, 0}}, "nouveau")}, std::nullopt);
  EXPECT_EQ(mystery.bytes, 0u);
  EXPECT_EQ(mystery.classes["gtt"], MemoryClass::Unknown);
  // amdgpu's cpu placement is TTM pages: counted, and host-uncharged.
  auto amd =
      count({client({{"gtt", 2 * GiB, 0}, {"cpu", 64 * MiB, 0}, {"vram", GiB, 0}})}, std::nullopt);
  EXPECT_EQ(amd.bytes, 3 * GiB + 64 * MiB);
  EXPECT_EQ(amd.hostUncharged, 2 * GiB + 64 * MiB);
}

// One region name that two drivers class differently is not summed: the
// table has no such pair today; a new driver could add one.
TEST(GpuMemory, TwoDriversDisagreeingOnANameMakeItUnknown) {
  auto a = client({{"memory", GiB, 0}}, "v3d");
  auto b = client({{"memory", GiB, 0}}, "v3d");
  b["memory"].cls = MemoryClass::Device;
  auto u = count({a, b}, std::nullopt);
  EXPECT_EQ(u.classes["memory"], MemoryClass::Unknown);
  EXPECT_EQ(u.regions["memory"], 2 * GiB);  // shown
  EXPECT_EQ(u.bytes, 0u);                   // not counted
  report::RegionMap merged = a;
  report::addInto(merged, b);
  EXPECT_EQ(merged["memory"].cls, MemoryClass::Unknown);
}

}  // namespace
}  // namespace tally
