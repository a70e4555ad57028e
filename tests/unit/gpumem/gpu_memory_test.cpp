// The one counting rule (gpumem/gpu_memory): exact bytes for shared
// buffers, KFD as a floor (never added, never replacing a region), clients
// whose driver prints no figure (unknown, never 0), incomplete clients, and
// the memory classes each driver's regions belong to (devices/memory_class).
#include "gpumem/gpu_memory.h"

#include <gtest/gtest.h>

namespace tally {
namespace {

using devices::MemoryClass;
constexpr std::uint64_t GiB = 1ULL << 30;
constexpr std::uint64_t MiB = 1ULL << 20;

using Region = std::tuple<const char*, std::optional<std::uint64_t>, std::optional<std::uint64_t>>;

// One client's regions as `driver` printed them (amdgpu unless named), each
// classed as gpumem::clientRegions classes them.
gpumem::ClientRegions client(std::initializer_list<Region> regions, const char* driver = "amdgpu") {
  gpumem::ClientRegions c;
  c.driver = driver;
  bool withDevice = false;
  for (const auto& [name, resident, shared] : regions)
    withDevice = withDevice || devices::classifyRegion(driver, name) == MemoryClass::Device;
  for (const auto& [name, resident, shared] : regions) {
    gpumem::RegionSums s;
    s.resident.add(resident);
    s.shared.add(shared);
    s.cls = devices::classifyRegion(driver, name, withDevice);
    c.regions.emplace(name, s);
  }
  return c;
}

gpumem::GpuMemory count(const std::vector<gpumem::ClientRegions>& clients,
                        std::optional<gpumem::KfdFigure> kfd) {
  std::vector<const gpumem::ClientRegions*> maps;
  for (const auto& c : clients) maps.push_back(&c);
  return gpumem::countGpuMemory(maps, kfd);
}

gpumem::KfdFigure kfd(std::uint64_t bytes, std::uint64_t inGtt) { return {bytes, inGtt}; }

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

// A Strix Halo running ROCm (kernel >= 6.10, apu_prefer_gtt): hipMalloc of
// 25.9 GB is a VRAM-flagged KFD allocation that amdgpu places in GTT. KFD's
// vram_<gpuid> counts it, and the render node's fdinfo shows the same bytes
// as drm-resident-gtt (the buffer belongs to the VM of the file KFD
// acquired). The process holds 25.9 GB: counted once, never 51.7 GB.
TEST(GpuMemory, RocmOnAnApuIsCountedOnceNotTwice) {
  const std::uint64_t model = 25'900'000'000;  // the buffers, bytes
  const std::uint64_t runtime = 96 * MiB;      // ROCm's own GTT (queues, signals)
  auto u = count({client({{"gtt", model + runtime, 0}, {"vram", 0, 0}, {"cpu", 0, 0}})},
                 kfd(model, model));
  EXPECT_EQ(u.bytes, model + runtime);
  EXPECT_EQ(u.fdinfoBytes, model + runtime);
  EXPECT_EQ(u.regions["gtt"], model + runtime);
  EXPECT_EQ(u.regions["vram"], 0u) << "KFD never replaces a region";
  EXPECT_EQ(u.kfdAbove, 0u);
  EXPECT_EQ(u.kfd->bytes, model);  // shown beside, labelled
  EXPECT_EQ(u.source, "drm-fdinfo");
  EXPECT_EQ(u.hostUncharged, model + runtime);
  // The same host with the carve-out larger than GTT (no apu_prefer_gtt):
  // ROCm's buffer is in VRAM, fdinfo shows it there; still counted once.
  auto carveOut = count({client({{"gtt", runtime, 0}, {"vram", model, 0}})}, kfd(model, 0));
  EXPECT_EQ(carveOut.bytes, model + runtime);
  EXPECT_EQ(carveOut.hostUncharged, runtime);
  EXPECT_EQ(carveOut.source, "drm-fdinfo");
}

// A discrete card: a 4 GiB KFD VRAM buffer evicted to GTT under pressure is
// still in vram_usage; fdinfo shows it as gtt now. Counted once: 4 GiB + the
// 1 GiB that stayed in VRAM = the whole fdinfo sum, which KFD does not exceed.
TEST(GpuMemory, AKfdBufferEvictedToGttIsCountedOnce) {
  auto u = count({client({{"gtt", 4 * GiB, 0}, {"vram", GiB, 0}})}, kfd(5 * GiB, 0));
  EXPECT_EQ(u.bytes, 5 * GiB);
  EXPECT_EQ(u.kfdAbove, 0u);
  EXPECT_EQ(u.source, "drm-fdinfo");
}

// Older kernels whose fdinfo misses KFD's buffers (KFD's own VM): the KFD
// figure exceeds the whole fdinfo sum and raises it, by exactly the excess;
// on a device that places ROCm's memory in GTT that excess is host-uncharged.
TEST(GpuMemory, KfdIsAFloorWhenFdinfoMissesItsBuffers) {
  auto u = count({client({{"gtt", GiB, 0}, {"vram", 0, 0}})}, kfd(12 * GiB, 0));
  EXPECT_EQ(u.fdinfoBytes, GiB);
  EXPECT_EQ(u.bytes, 12 * GiB) << "the floor, not 13 GiB";
  EXPECT_EQ(u.kfdAbove, 11 * GiB);
  EXPECT_EQ(u.regions["vram"], 0u) << "regions stay fdinfo's";
  EXPECT_EQ(u.source, "drm-fdinfo+kfd-sysfs");
  EXPECT_EQ(u.hostUncharged, GiB);  // KFD's excess is VRAM here
  auto apu = count({client({{"gtt", GiB, 0}})}, kfd(12 * GiB, 12 * GiB));
  EXPECT_EQ(apu.hostUncharged, 12 * GiB);  // 1 GiB of gtt + 11 GiB excess, in GTT
  auto onlyKfd = count({}, kfd(2 * GiB, 0));
  EXPECT_EQ(onlyKfd.bytes, 2 * GiB);
  EXPECT_EQ(onlyKfd.source, "drm-fdinfo+kfd-sysfs");
}

// nouveau, virtio_gpu and vmwgfx print no drm-*-memory key: a client of
// theirs makes the figure unknown with the driver named, never 0; KFD's
// floor cannot stand in for a figure nobody measured.
TEST(GpuMemory, AClientWhoseDriverPrintsNoFiguresMakesTheSumUnknown) {
  auto u = count({client({}, "nouveau")}, std::nullopt);
  EXPECT_FALSE(u.bytes);
  EXPECT_EQ(u.unknown, "a client of nouveau prints no memory figures");
  auto two = count({client({{"gtt", GiB, 0}}), client({}, "virtio_gpu"), client({}, "vmwgfx")},
                   kfd(4 * GiB, 0));
  EXPECT_FALSE(two.bytes);
  EXPECT_EQ(two.unknown, "a client of virtio_gpu and vmwgfx prints no memory figures");
  EXPECT_EQ(two.regions["gtt"], GiB);  // what is known is still shown
  auto unnamed = count({client({}, "")}, std::nullopt);
  EXPECT_EQ(unnamed.unknown, "a client of an unnamed driver prints no memory figures");
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
// i915's system0 is shmem on an integrated part, already in memory.current:
// shown, never added. v3d's, panthor's, etnaviv's and intel_vpu's `memory`
// likewise; a driver not in the table is shown as unknown, not guessed in.
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
  for (const char* shmem : {"v3d", "panthor", "etnaviv", "intel_vpu"}) {
    auto u = count({client({{"memory", 3520 * 1024, std::nullopt}}, shmem)}, std::nullopt);
    EXPECT_EQ(u.bytes, 0u) << shmem;
    EXPECT_EQ(u.classes["memory"], MemoryClass::HostCharged) << shmem;
  }
  auto mystery = count({client({{"gtt", GiB, 0}}, "foodrm")}, std::nullopt);
  EXPECT_EQ(mystery.bytes, 0u);
  EXPECT_EQ(mystery.classes["gtt"], MemoryClass::Unknown);
  // amdgpu's cpu placement is TTM pages: counted, and host-uncharged.
  auto amd =
      count({client({{"gtt", 2 * GiB, 0}, {"cpu", 64 * MiB, 0}, {"vram", GiB, 0}})}, std::nullopt);
  EXPECT_EQ(amd.bytes, 3 * GiB + 64 * MiB);
  EXPECT_EQ(amd.hostUncharged, 2 * GiB + 64 * MiB);
}

// An i915 DG2 (a discrete part: the client prints local0 beside system0):
// system0 holds smem-only shmem objects (charged) and LMEM|SMEM objects'
// TTM pool pages (not charged). Its own class: counted and flagged, never
// subtracted by the hand-over as if it were GTT.
TEST(GpuMemory, I915SystemMemoryOnADiscretePartIsHostMixed) {
  auto dg2 =
      count({client({{"local0", 2 * GiB, 0}, {"system0", 300 * MiB, 0}, {"stolen-local0", 0, 0}},
                    "i915")},
            std::nullopt);
  EXPECT_EQ(dg2.classes["local0"], MemoryClass::Device);
  EXPECT_EQ(dg2.classes["system0"], MemoryClass::HostMixed);
  EXPECT_EQ(dg2.bytes, 2 * GiB + 300 * MiB);
  EXPECT_EQ(dg2.hostMixed, 300 * MiB);
  EXPECT_EQ(dg2.hostUncharged, 0u);
}

// One region name that two drivers class differently is not summed: the
// table has no such pair today; a new driver could add one.
TEST(GpuMemory, TwoDriversDisagreeingOnANameMakeItUnknown) {
  auto a = client({{"memory", GiB, 0}}, "v3d");
  auto b = client({{"memory", GiB, 0}}, "v3d");
  b.regions["memory"].cls = MemoryClass::Device;
  auto u = count({a, b}, std::nullopt);
  EXPECT_EQ(u.classes["memory"], MemoryClass::Unknown);
  EXPECT_EQ(u.regions["memory"], 2 * GiB);  // shown
  EXPECT_EQ(u.bytes, 0u);                   // not counted
  gpumem::RegionMap merged = a.regions;
  gpumem::addInto(merged, b.regions);
  EXPECT_EQ(merged["memory"].cls, MemoryClass::Unknown);
}

// What a stored sample holds: the regions by memory class, whichever driver
// named them (an xe vram0 is device memory as amdgpu's vram is); a class no
// region of was read is absent, and a region with no class is unknown.
TEST(GpuMemory, RegionsSumByMemoryClassWhateverTheirNames) {
  auto xe = count({client({{"gtt", 192 * 1024, 0},
                           {"system", 0, 0},
                           {"vram0", 23 * MiB, 0},
                           {"vram1", MiB, 0},
                           {"stolen", 0, 0}},
                          "xe")},
                  std::nullopt);
  EXPECT_EQ(gpumem::bytesByClass(xe.regions, xe.classes),
            (devices::BytesByClass{.device = 24 * MiB, .hostUncharged = 192 * 1024, .other = 0}));
  auto i915 = count({client({{"system0", 6 * MiB, 0}, {"local0", GiB, 0}}, "i915")}, std::nullopt);
  EXPECT_EQ(gpumem::bytesByClass(i915.regions, i915.classes),
            (devices::BytesByClass{.device = GiB, .hostMixed = 6 * MiB}));
  auto v3d = count({client({{"memory", GiB, 0}}, "v3d")}, std::nullopt);
  EXPECT_EQ(gpumem::bytesByClass(v3d.regions, v3d.classes),
            (devices::BytesByClass{.hostCharged = GiB}));
  std::map<std::string, std::uint64_t> unclassed = {{"vram", 5}, {"weird", 7}};
  EXPECT_EQ(gpumem::bytesByClass(unclassed, {{"vram", MemoryClass::Device}}),
            (devices::BytesByClass{.device = 5, .unknown = 7}));
  EXPECT_EQ(gpumem::bytesByClass({}, {}), devices::BytesByClass{});
}

}  // namespace
}  // namespace tally
