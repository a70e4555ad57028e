// The DRM fdinfo parser on the real samples (exact values) and on hostile input.
#include "probes/drm_fdinfo.h"

#include <gtest/gtest.h>

#include <string>

#include "devices/memory_class.h"
#include "support/fake_host.h"

namespace tally::probes {
namespace {

using testing::readFile;

constexpr std::uint64_t KiB = 1024;
constexpr std::uint64_t MiB = 1024 * 1024;

std::string fixture(const std::string& name) {
  std::string text = readFile(std::string(TALLY_FIXTURE_DIR) + "/fdinfo/" + name);
  EXPECT_FALSE(text.empty()) << name;
  return text;
}

const RegionStats& region(const DrmFdinfo& f, const char* name) {
  const RegionStats* r = f.region(name);
  EXPECT_NE(r, nullptr) << "region " << name;
  static const RegionStats kNone;
  return r ? *r : kNone;
}

std::optional<std::uint64_t> amd(const DrmFdinfo& f, const char* key) {
  for (const auto& [k, v] : f.amd)
    if (k == key) return v;
  return std::nullopt;
}

TEST(DrmFdinfo, AmdgpuTursulinSampleExact) {
  auto f = parseDrmFdinfo(fixture("amdgpu-2024-tursulin-patch.fdinfo"));
  EXPECT_TRUE(f.rejected.empty());
  EXPECT_TRUE(f.hasUsageStats);
  EXPECT_EQ(f.driver, "amdgpu");
  EXPECT_EQ(f.clientId, 4u);
  EXPECT_EQ(f.pdev, "0000:04:00.0");
  EXPECT_EQ(f.pasid, 32771u);
  ASSERT_EQ(f.regions.size(), 3u);
  const auto& cpu = region(f, "cpu");
  EXPECT_EQ(cpu.total, 0u);
  EXPECT_EQ(cpu.shared, 0u);
  EXPECT_EQ(cpu.active, 0u);
  EXPECT_EQ(cpu.resident, 0u);
  EXPECT_EQ(cpu.purgeable, 0u);
  EXPECT_EQ(cpu.memory, 0u);
  const auto& gtt = region(f, "gtt");
  EXPECT_EQ(gtt.total, 2392 * KiB);
  EXPECT_EQ(gtt.shared, 0u);
  EXPECT_EQ(gtt.active, 0u);
  EXPECT_EQ(gtt.resident, 2392 * KiB);
  EXPECT_EQ(gtt.purgeable, 0u);
  EXPECT_EQ(gtt.memory, 2392 * KiB);  // "drm-memory-gtt: \t": space before the tab
  const auto& vram = region(f, "vram");
  EXPECT_EQ(vram.total, 44564 * KiB);
  EXPECT_EQ(vram.shared, 31952 * KiB);
  EXPECT_EQ(vram.active, 0u);
  EXPECT_EQ(vram.resident, 44564 * KiB);
  EXPECT_EQ(vram.purgeable, 0u);
  EXPECT_EQ(vram.memory, 44564 * KiB);
  // Printed under two keys, counted once: drm-resident wins over drm-memory.
  auto res = residentOf(gtt);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->bytes, 2392 * KiB);
  EXPECT_EQ(res->source, ResidentSource::kDrmResident);
  EXPECT_EQ(amd(f, "amd-memory-visible-vram"), 44564 * KiB);
  EXPECT_EQ(amd(f, "amd-evicted-vram"), 0u);
  EXPECT_EQ(amd(f, "amd-evicted-visible-vram"), 0u);
  EXPECT_EQ(amd(f, "amd-requested-vram"), 44564 * KiB);
  EXPECT_EQ(amd(f, "amd-requested-visible-vram"), 11952 * KiB);
  EXPECT_EQ(amd(f, "amd-requested-gtt"), 2392 * KiB);
  ASSERT_NE(f.engine("compute"), nullptr);
  EXPECT_EQ(f.engine("compute")->busyNs, 46464671u);
}

TEST(DrmFdinfo, AmdgpuPre65SampleExact) {
  auto f = parseDrmFdinfo(fixture("amdgpu-2024-amdgpu_top-issue87.fdinfo"));
  EXPECT_TRUE(f.rejected.empty());
  EXPECT_EQ(f.driver, "amdgpu");
  EXPECT_EQ(f.pdev, "0000:08:00.0");
  EXPECT_EQ(f.clientId, 217u);
  EXPECT_EQ(f.pasid, 32784u);
  EXPECT_EQ(region(f, "vram").memory, 2068 * KiB);
  EXPECT_EQ(region(f, "gtt").memory, 8192 * KiB);
  EXPECT_EQ(region(f, "cpu").memory, 0u);
  EXPECT_FALSE(region(f, "gtt").total.has_value());  // never printed: absent, not 0
  auto res = residentOf(region(f, "gtt"));
  ASSERT_TRUE(res);
  EXPECT_EQ(res->bytes, 8192 * KiB);
  EXPECT_EQ(res->source, ResidentSource::kDrmMemory);
  ASSERT_NE(f.engine("gfx"), nullptr);
  EXPECT_EQ(f.engine("gfx")->busyNs, 107322799u);
}

TEST(DrmFdinfo, AmdgpuApuPartialSampleExact) {
  auto f = parseDrmFdinfo(fixture("amdgpu-6.18-apu-nvtop492.partial.fdinfo"));
  EXPECT_TRUE(f.rejected.empty());
  EXPECT_EQ(f.driver, "");
  EXPECT_FALSE(f.clientId.has_value());
  EXPECT_EQ(region(f, "gtt").memory, 25258000 * KiB);  // the 24 GB model
  EXPECT_EQ(region(f, "gtt").memory, 25864192000u);
  EXPECT_EQ(region(f, "vram").memory, 5348 * KiB);
  EXPECT_EQ(region(f, "cpu").memory, 0u);
}

TEST(DrmFdinfo, XeSampleExact) {
  auto f = parseDrmFdinfo(fixture("xe-kernel-doc.fdinfo"));
  EXPECT_TRUE(f.rejected.empty());
  EXPECT_EQ(f.driver, "xe");
  EXPECT_EQ(f.clientId, 3u);
  EXPECT_EQ(f.pdev, "0000:03:00.0");
  ASSERT_EQ(f.regions.size(), 4u);
  const auto& system = region(f, "system");
  EXPECT_EQ(system.total, 0u);
  EXPECT_EQ(system.purgeable, 0u);
  EXPECT_EQ(region(f, "gtt").total, 192 * KiB);
  EXPECT_EQ(region(f, "gtt").resident, 192 * KiB);
  EXPECT_FALSE(region(f, "gtt").purgeable.has_value());
  EXPECT_EQ(region(f, "vram0").total, 23992 * KiB);
  EXPECT_EQ(region(f, "vram0").shared, 16 * MiB);  // MiB and KiB in one file
  EXPECT_EQ(region(f, "vram0").resident, 23992 * KiB);
  EXPECT_EQ(region(f, "stolen").resident, 0u);
  ASSERT_EQ(f.engines.size(), 5u);
  EXPECT_EQ(f.engine("rcs")->cycles, 28257900u);
  EXPECT_EQ(f.engine("rcs")->totalCycles, 7655183225u);
  EXPECT_FALSE(f.engine("rcs")->capacity.has_value());  // absent means 1
  EXPECT_EQ(f.engine("bcs")->cycles, 0u);
  EXPECT_EQ(f.engine("vcs")->capacity, 2u);
  EXPECT_EQ(f.engine("vecs")->capacity, 2u);
  EXPECT_EQ(f.engine("ccs")->capacity, 4u);
  EXPECT_EQ(f.engine("ccs")->totalCycles, 7655183225u);
}

TEST(DrmFdinfo, I915SampleExact) {
  auto f = parseDrmFdinfo(fixture("i915-manpages-patch.fdinfo"));
  EXPECT_TRUE(f.rejected.empty());
  EXPECT_EQ(f.driver, "i915");
  EXPECT_EQ(f.clientId, 39u);
  EXPECT_EQ(f.pdev, "0000:00:02.0");
  ASSERT_EQ(f.regions.size(), 2u);
  EXPECT_EQ(region(f, "system0").total, 6044 * KiB);
  EXPECT_EQ(region(f, "system0").resident, 6044 * KiB);
  EXPECT_EQ(region(f, "system0").purgeable, 1688 * KiB);
  EXPECT_EQ(region(f, "stolen-system0").total, 0u);
  EXPECT_EQ(f.engine("render")->busyNs, 346249u);
  EXPECT_EQ(f.engine("copy")->busyNs, 0u);
  EXPECT_EQ(f.engine("video")->capacity, 2u);
  EXPECT_EQ(f.engine("video-enhance")->busyNs, 0u);
  EXPECT_EQ(f.engines.size(), 4u);
}

// drm_print_memory_stats prints whole MiB as MiB: one file mixes MiB, KiB and bare bytes.
TEST(DrmFdinfo, AmdgpuMibUnitsSampleExact) {
  auto f = parseDrmFdinfo(fixture("amdgpu-2024-tursulin-v1-mib.fdinfo"));
  EXPECT_TRUE(f.rejected.empty());
  EXPECT_EQ(f.driver, "amdgpu");
  EXPECT_EQ(f.clientId, 30u);
  EXPECT_EQ(f.pdev, "0000:04:00.0");
  EXPECT_EQ(f.pasid, 32785u);
  ASSERT_EQ(f.regions.size(), 3u);
  EXPECT_EQ(region(f, "cpu").total, 0u);
  EXPECT_EQ(region(f, "cpu").resident, 0u);
  EXPECT_EQ(region(f, "cpu").memory, 0u);
  const auto& gtt = region(f, "gtt");
  EXPECT_EQ(gtt.total, 22 * MiB);
  EXPECT_EQ(gtt.shared, 0u);
  EXPECT_EQ(gtt.active, 10 * MiB);
  EXPECT_EQ(gtt.resident, 22 * MiB);
  EXPECT_EQ(gtt.memory, 22528 * KiB);  // the legacy key says the same in KiB
  EXPECT_EQ(*gtt.memory, *gtt.resident);
  const auto& vram = region(f, "vram");
  EXPECT_EQ(vram.total, 544428 * KiB);
  EXPECT_EQ(vram.shared, 13584 * KiB);
  EXPECT_EQ(vram.active, 260356 * KiB);
  EXPECT_EQ(vram.resident, 544428 * KiB);
  EXPECT_EQ(vram.memory, 544428 * KiB);
  EXPECT_EQ(amd(f, "amd-requested-visible-vram"), 90112 * KiB);
  EXPECT_EQ(amd(f, "amd-requested-gtt"), 22528 * KiB);
  EXPECT_EQ(f.engine("gfx")->busyNs, 39456116802u);
  EXPECT_EQ(devices::classifyRegion(f.driver, "gtt"), devices::MemoryClass::HostUncharged);
  EXPECT_EQ(devices::classifyRegion(f.driver, "cpu"), devices::MemoryClass::HostUncharged);
  EXPECT_EQ(devices::classifyRegion(f.driver, "vram"), devices::MemoryClass::Device);
}

// v3d: one shmem `memory` region, no client id (so no deduplication key).
TEST(DrmFdinfo, V3dPartialSampleExact) {
  auto f = parseDrmFdinfo(fixture("v3d-rpi5-glances3611.partial.fdinfo"));
  EXPECT_TRUE(f.rejected.empty());
  EXPECT_EQ(f.driver, "v3d");
  EXPECT_FALSE(f.clientId.has_value());
  ASSERT_EQ(f.regions.size(), 1u);
  EXPECT_EQ(region(f, "memory").total, 3772 * KiB);
  EXPECT_EQ(region(f, "memory").resident, 3520 * KiB);
  EXPECT_EQ(devices::classifyRegion(f.driver, "memory"), devices::MemoryClass::HostCharged);
}

// amdxdna, the Strix Halo NPU on /dev/accel: the same drm-* keys, bare zeros.
TEST(DrmFdinfo, AmdxdnaAccelSampleExact) {
  auto f = parseDrmFdinfo(fixture("amdxdna-xdna-driver324.fdinfo"));
  EXPECT_TRUE(f.rejected.empty());
  EXPECT_TRUE(f.hasUsageStats);
  EXPECT_EQ(f.driver, "amdxdna_accel_driver");
  EXPECT_EQ(f.clientId, 76u);
  EXPECT_EQ(f.pdev, "0000:c5:00.1");
  ASSERT_EQ(f.regions.size(), 1u);
  EXPECT_EQ(region(f, "memory").total, 0u);
  EXPECT_EQ(region(f, "memory").shared, 0u);
  EXPECT_EQ(region(f, "memory").active, 0u);
  EXPECT_FALSE(region(f, "memory").resident.has_value());  // not printed: absent
  ASSERT_NE(f.engine("npu-amdxdna"), nullptr);
  EXPECT_EQ(f.engine("npu-amdxdna")->busyNs, 0u);
  EXPECT_EQ(devices::classifyRegion(f.driver, "memory"), devices::MemoryClass::HostCharged);
}

// Every region of the kernel's samples has a class; none is unknown.
TEST(DrmFdinfo, EverySampleRegionHasItsDriversClass) {
  using devices::MemoryClass;
  struct Want {
    const char* file;
    const char* region;
    MemoryClass cls;
  };
  for (const Want& w : std::initializer_list<Want>{
           {"amdgpu-2024-tursulin-patch.fdinfo", "gtt", MemoryClass::HostUncharged},
           {"amdgpu-2024-tursulin-patch.fdinfo", "cpu", MemoryClass::HostUncharged},
           {"amdgpu-2024-tursulin-patch.fdinfo", "vram", MemoryClass::Device},
           {"amdgpu-2024-amdgpu_top-issue87.fdinfo", "gtt", MemoryClass::HostUncharged},
           {"xe-kernel-doc.fdinfo", "system", MemoryClass::HostUncharged},
           {"xe-kernel-doc.fdinfo", "gtt", MemoryClass::HostUncharged},
           {"xe-kernel-doc.fdinfo", "vram0", MemoryClass::Device},
           {"xe-kernel-doc.fdinfo", "stolen", MemoryClass::Other},
           {"i915-manpages-patch.fdinfo", "system0", MemoryClass::HostCharged},
           {"i915-manpages-patch.fdinfo", "stolen-system0", MemoryClass::Other},
       }) {
    auto f = parseDrmFdinfo(fixture(w.file));
    ASSERT_NE(f.region(w.region), nullptr) << w.file << " " << w.region;
    EXPECT_EQ(devices::classifyRegion(f.driver, w.region), w.cls) << w.file << " " << w.region;
  }
}

TEST(DrmFdinfo, Amdgpu514Format) {
  auto f = parseDrmFdinfo(
      "pos:\t0\nflags:\t02100002\nmnt_id:\t23\npdev:\t0000:03:00.0\npasid:\t32769\n"
      "vram mem:\t1024 kB\ngtt mem:\t2048 kB\ncpu mem:\t0 kB\ngfx0:\t12.34%\nsdma0:\t0.00%\n");
  EXPECT_TRUE(f.rejected.empty());
  EXPECT_EQ(f.pdev, "0000:03:00.0");
  EXPECT_EQ(f.pasid, 32769u);
  EXPECT_FALSE(f.clientId.has_value());
  auto res = residentOf(region(f, "gtt"));
  ASSERT_TRUE(res);
  EXPECT_EQ(res->bytes, 2048 * KiB);
  EXPECT_EQ(res->source, ResidentSource::kAmdgpu514);
  EXPECT_EQ(region(f, "vram").legacy514, 1024 * KiB);
}

TEST(DrmFdinfo, RegionUnderThreeKeysCountsOnce) {
  auto f = parseDrmFdinfo(
      "drm-driver:\tamdgpu\ndrm-client-id:\t1\ngtt mem:\t4 kB\n"
      "drm-memory-gtt: \t2 KiB\ndrm-resident-gtt:\t1024\ndrm-total-gtt:\t8 KiB\n");
  auto res = residentOf(region(f, "gtt"));
  ASSERT_TRUE(res);
  EXPECT_EQ(res->bytes, 1024u);  // resident, not 1024 + 2048 + 4096
  EXPECT_EQ(res->source, ResidentSource::kDrmResident);
  EXPECT_EQ(region(f, "gtt").total, 8 * KiB);  // total kept separately
}

TEST(DrmFdinfo, EmptyInput) {
  auto f = parseDrmFdinfo("");
  EXPECT_FALSE(f.hasUsageStats);
  EXPECT_TRUE(f.regions.empty());
  EXPECT_TRUE(f.rejected.empty());
  EXPECT_EQ(f.driver, "");
}

TEST(DrmFdinfo, NonDrmFdinfoHasNoUsageStats) {
  auto f = parseDrmFdinfo("pos:\t0\nflags:\t0100002\nmnt_id:\t26\nino:\t5\n");
  EXPECT_FALSE(f.hasUsageStats);
  EXPECT_TRUE(f.rejected.empty());
}

TEST(DrmFdinfo, TruncatedMidUnitRejectsOnlyThatLine) {
  std::string full = fixture("amdgpu-2024-tursulin-patch.fdinfo");
  std::string cut = full.substr(0, full.find("drm-resident-vram:\t44564 K") + 26);
  auto f = parseDrmFdinfo(cut);
  ASSERT_EQ(f.rejected.size(), 1u);
  EXPECT_EQ(f.rejected[0].line, 22u);
  EXPECT_FALSE(region(f, "vram").resident.has_value());
  EXPECT_EQ(region(f, "vram").total, 44564 * KiB);
  EXPECT_EQ(region(f, "gtt").resident, 2392 * KiB);
}

TEST(DrmFdinfo, EveryPrefixParsesWithoutLosingCompleteLines) {
  std::string full = fixture("xe-kernel-doc.fdinfo");
  for (std::size_t n = 0; n <= full.size(); ++n) {
    auto f = parseDrmFdinfo(std::string_view(full).substr(0, n));
    EXPECT_LE(f.rejected.size(), 1u) << "prefix " << n;  // only the cut line may be malformed
    std::size_t complete = full.rfind('\n', n == 0 ? 0 : n - 1);
    if (n > 0 && complete != std::string::npos && complete > full.find("drm-client-id")) {
      EXPECT_EQ(f.clientId, 3u) << "prefix " << n;
    }
  }
}

TEST(DrmFdinfo, HundredKiBLine) {
  std::string name(100 * 1024, 'a');
  auto f =
      parseDrmFdinfo("drm-driver:\tamdgpu\ndrm-client-name:\t" + name + "\n" +
                     std::string(100 * 1024, 'x') + "\ndrm-client-id:\t7\ndrm-total-gtt:\t1 MiB\n");
  EXPECT_EQ(f.clientName->size(), 100u * 1024);
  ASSERT_EQ(f.rejected.size(), 1u);  // the colon-less 100 KiB line
  EXPECT_EQ(f.rejected[0].line, 3u);
  EXPECT_EQ(f.clientId, 7u);
  EXPECT_EQ(region(f, "gtt").total, MiB);
}

TEST(DrmFdinfo, NulBytesRejectLineNotFile) {
  using namespace std::string_literals;
  auto f = parseDrmFdinfo(
      "drm-driver:\tamd\0gpu\ndrm-total-gtt:\t12\0 KiB\ndrm-to\0tal-vram:\t4\n"
      "drm-client-id:\t9\ndrm-resident-gtt:\t3 KiB\n"s);
  EXPECT_EQ(f.rejected.size(), 3u);
  EXPECT_EQ(f.driver, "");
  EXPECT_FALSE(region(f, "gtt").total.has_value());
  EXPECT_EQ(region(f, "gtt").resident, 3 * KiB);
  EXPECT_EQ(f.clientId, 9u);
  EXPECT_EQ(f.region("vram"), nullptr);
}

TEST(DrmFdinfo, U64Overflow) {
  auto f = parseDrmFdinfo(
      "drm-total-gtt:\t18446744073709551615\n"
      "drm-total-vram:\t18446744073709551616\n"
      "drm-resident-vram:\t18014398509481984 KiB\n"
      "drm-resident-gtt:\t18014398509481983 KiB\n"
      "drm-client-id:\t99999999999999999999999\n"
      "drm-shared-gtt:\t17592186044416 MiB\n");
  EXPECT_EQ(region(f, "gtt").total, 18446744073709551615u);
  EXPECT_FALSE(region(f, "vram").total.has_value());
  EXPECT_FALSE(region(f, "vram").resident.has_value());  // 2^64 bytes
  EXPECT_EQ(region(f, "gtt").resident, 18014398509481983u * KiB);
  EXPECT_FALSE(f.clientId.has_value());
  EXPECT_FALSE(region(f, "gtt").shared.has_value());  // 2^44 MiB = 2^64 bytes
  EXPECT_EQ(f.rejected.size(), 4u);
}

TEST(DrmFdinfo, DuplicateKeysKeepFirst) {
  auto f = parseDrmFdinfo(
      "drm-client-id:\t5\ndrm-client-id:\t6\ndrm-driver:\ta\ndrm-driver:\tb\n"
      "drm-total-gtt:\t1\ndrm-total-gtt:\t2\namd-requested-gtt:\t1 KiB\n"
      "amd-requested-gtt:\t2 KiB\n");
  EXPECT_EQ(f.clientId, 5u);
  EXPECT_EQ(f.driver, "a");
  EXPECT_EQ(region(f, "gtt").total, 1u);
  ASSERT_EQ(f.amd.size(), 1u);
  EXPECT_EQ(f.amd[0].second, KiB);
  ASSERT_EQ(f.rejected.size(), 4u);
  EXPECT_EQ(f.rejected[0].line, 2u);
  EXPECT_EQ(f.rejected[0].reason, "duplicate key; first value kept");
}

TEST(DrmFdinfo, Units) {
  EXPECT_EQ(parseDrmSize("0"), 0u);
  EXPECT_EQ(parseDrmSize("4096"), 4096u);
  EXPECT_EQ(parseDrmSize("4 KiB"), 4 * KiB);
  EXPECT_EQ(parseDrmSize("4\tKiB"), 4 * KiB);
  EXPECT_EQ(parseDrmSize("4      KiB"), 4 * KiB);  // any number of blanks before the unit
  EXPECT_EQ(parseDrmSize("3 MiB"), 3 * MiB);
  EXPECT_EQ(parseDrmSize("7 kB"), 7 * KiB);  // amdgpu 5.14
  for (const char* bad : {"4 GiB", "4 B", "4 kb", "4 KB", "4KiB", "4 KiBs", "-4", "+4", " ", "",
                          "0x10", "4.5 MiB", "KiB", "4 KiB 5"})
    EXPECT_FALSE(parseDrmSize(bad).has_value()) << bad;
}

TEST(DrmFdinfo, UnknownUnitRejected) {
  auto f = parseDrmFdinfo("drm-total-gtt:\t4 GiB\ndrm-resident-gtt:\t2 KiB\n");
  ASSERT_EQ(f.rejected.size(), 1u);
  EXPECT_FALSE(region(f, "gtt").total.has_value());
  EXPECT_EQ(region(f, "gtt").resident, 2 * KiB);
}

TEST(DrmFdinfo, CrlfParsesAsLf) {
  std::string lf = fixture("amdgpu-2024-tursulin-patch.fdinfo");
  std::string crlf;
  for (char c : lf) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  auto a = parseDrmFdinfo(lf);
  auto b = parseDrmFdinfo(crlf);
  EXPECT_TRUE(b.rejected.empty());
  EXPECT_EQ(b.driver, "amdgpu");
  EXPECT_EQ(b.clientId, a.clientId);
  EXPECT_EQ(region(b, "vram").shared, 31952 * KiB);
  EXPECT_EQ(region(b, "gtt").memory, 2392 * KiB);
}

TEST(DrmFdinfo, MalformedLinesDoNotAbortFile) {
  auto f = parseDrmFdinfo(
      "drm-driver:\tamdgpu\nthis line has no colon\n:\tnokey\nbad key:\t1\n"
      "drm-total-:\t5\ndrm-engine-capacity-gfx:\t0\ndrm-engine-gfx:\t5 ms\n"
      "drm-client-id:\t12\ndrm-resident-gtt:\t4 KiB\n");
  EXPECT_EQ(f.rejected.size(), 6u);
  EXPECT_EQ(f.clientId, 12u);
  EXPECT_EQ(region(f, "gtt").resident, 4 * KiB);
}

TEST(DrmFdinfo, EngineUnitsAndMaxfreq) {
  auto f = parseDrmFdinfo(
      "drm-engine-render:\t100 ns\ndrm-engine-copy:\t5\ndrm-maxfreq-render:\t1500 MHz\n"
      "drm-maxfreq-copy:\t300 KHz\ndrm-cycles-render:\t9\ndrm-total-cycles-render:\t10\n");
  EXPECT_TRUE(f.rejected.empty());
  EXPECT_EQ(f.engine("render")->busyNs, 100u);
  EXPECT_EQ(f.engine("copy")->busyNs, 5u);
  EXPECT_EQ(f.engine("render")->maxfreqHz, 1500000000u);
  EXPECT_EQ(f.engine("copy")->maxfreqHz, 300000u);
  EXPECT_EQ(f.engine("render")->cycles, 9u);
  EXPECT_EQ(f.engine("render")->totalCycles, 10u);
  EXPECT_EQ(f.regions.size(), 0u);  // drm-total-cycles-* is not a region
}

TEST(DrmFdinfo, UnknownKeysIgnored) {
  auto f =
      parseDrmFdinfo("drm-driver:\tx\ndrm-future-key:\t1\nvendor-key:\tz\ndrm-client-id:\t1\n");
  EXPECT_TRUE(f.rejected.empty());
  EXPECT_EQ(f.clientId, 1u);
  EXPECT_TRUE(f.regions.empty());
}

TEST(DrmFdinfo, ClientNameWithBlanks) {
  auto f = parseDrmFdinfo("drm-client-name:\tllama server 1\n");
  EXPECT_EQ(f.clientName, "llama server 1");
}

}  // namespace
}  // namespace tally::probes
