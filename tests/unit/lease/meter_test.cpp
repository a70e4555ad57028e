// The lease meter on a synthetic host: exact GPU sums per sample, peaks, and
// samples whose sum is unknown kept out of the peak.
#include "lease/meter.h"

#include <gtest/gtest.h>

#include "enforce/gpu_bound.h"
#include "fs/root.h"
#include "support/fake_host.h"

namespace tally {
namespace {

using namespace tally::testing;

constexpr const char* kLease = "/tally.slice/tally-ab.slice/tally-ab.scope";

struct Meter : ::testing::Test {
  FakeHost host;
  void SetUp() override {
    host.addDevice(FakeDevice{});
    writeFile(host.cgroupRoot() + kLease + "/memory.current", "4096000\n");
    writeFile(host.cgroupRoot() + kLease + "/memory.stat", "anon 4000000\nfile 96000\n");
  }
  lease::LeaseMeter meter(std::optional<std::uint64_t> budget = std::nullopt) {
    proc.emplace(*fs::Root::open(host.procRoot()));
    sys.emplace(*fs::Root::open(host.sysRoot()));
    cg.emplace(*fs::Root::open(host.cgroupRoot()));
    leaseCg.emplace(std::move(*cgroup::Cgroup::open(*cg, kLease)));
    return lease::LeaseMeter(*proc, *sys, *leaseCg, budget);
  }
  std::optional<fs::Root> proc, sys, cg;
  std::optional<cgroup::Cgroup> leaseCg;
};

TEST_F(Meter, SumsGttAndVramOfTheLeaseClients) {
  FakeProcess p;
  p.pid = 500;
  p.cgroup = kLease;
  FakeFd fd;
  fd.drmMinor = 128;
  fd.fdinfo = amdgpuFdinfo(7, "0000:c6:00.0", 1024, 2048);
  p.fds = {fd};
  host.addProcess(p);
  host.addCgroup(kLease, {500});
  auto m = meter(2 * 1024 * 1024);
  m.sample();
  EXPECT_EQ(m.host().samples, 1u);
  EXPECT_EQ(m.host().peakCurrent, 4096000u);
  EXPECT_EQ(m.host().statAtPeak->get("anon"), 4000000u);
  EXPECT_EQ(m.gpu().samples, 1u);
  EXPECT_EQ(m.gpu().peakBytes, (1024u + 2048u) * 1024u);
  EXPECT_EQ(m.gpu().atPeak.at("gtt"), 1024u * 1024u);
  EXPECT_EQ(m.gpu().atPeak.at("vram"), 2048u * 1024u);
  EXPECT_EQ(m.gpu().samplesOverBudget, 1u);
  EXPECT_EQ(m.gpu().maxClients, 1u);
}

TEST_F(Meter, ASampleWithoutResidentFiguresIsNotAPeak) {
  FakeProcess p;
  p.pid = 501;
  p.cgroup = kLease;
  FakeFd fd;
  fd.drmMinor = 128;
  fd.fdinfo =
      "drm-driver:\tamdgpu\ndrm-pdev:\t0000:c6:00.0\ndrm-client-id:\t9\ndrm-total-gtt:\t8 MiB\n";
  p.fds = {fd};
  host.addProcess(p);
  host.addCgroup(kLease, {501});
  auto m = meter();
  m.sample();
  EXPECT_EQ(m.gpu().samples, 1u);
  EXPECT_EQ(m.gpu().samplesIncomplete, 1u);
  EXPECT_FALSE(m.gpu().peakBytes) << "an unknown sum must not become a peak of 0";
}

TEST_F(Meter, UnreadableCountersStayAbsent) {
  host.addCgroup(kLease, {});
  writeFile(host.cgroupRoot() + kLease + "/memory.current", "lots\n");
  auto m = meter();
  m.sample();
  EXPECT_EQ(m.host().samples, 0u);
  EXPECT_FALSE(m.host().peakCurrent);
  EXPECT_NE(m.host().lastError->find("memory.current reads 'lots"), std::string::npos)
      << *m.host().lastError;
  EXPECT_EQ(m.gpu().peakBytes, 0u) << "an empty lease is a measured zero";
}

// Fixture trees from kernel truth (KERNEL-FACTS §10): what a lease holding
// each of these is metered at, worked out by hand, and what its bound does.
struct MeterTruth : ::testing::Test {
  static constexpr std::uint64_t KiB = 1024, MiB = KiB << 10, GiB = MiB << 10;
  static constexpr const char* kApu = "0000:c6:00.0";
  static constexpr std::uint64_t kGpuId = 44257;
  FakeHost host;
  std::optional<fs::Root> proc, sys, cg;
  std::optional<cgroup::Cgroup> leaseCg;

  void device(const std::string& bdf, const std::string& driver, std::vector<unsigned> minors,
              std::map<std::string, std::uint64_t> memInfo) {
    host.addDevice({bdf, driver, std::move(minors), std::move(memInfo), true});
  }
  // A process of the lease holding one DRM client (fdinfo as printed) and,
  // with `kfdBytes`, /dev/kfd with that much VRAM-flagged KFD memory.
  void process(pid_t pid, unsigned minor, const std::string& fdinfo,
               std::optional<std::uint64_t> kfdBytes = std::nullopt) {
    FakeProcess p;
    p.pid = pid;
    p.cgroup = kLease;
    FakeFd drm;
    drm.drmMinor = minor;
    drm.fdinfo = fdinfo;
    p.fds = {drm};
    if (kfdBytes) {
      FakeFd kfd;
      kfd.fd = 4;
      kfd.other = "char:240:0";
      p.fds.push_back(kfd);
      host.addKfd(pid, kGpuId, kApu, *kfdBytes);
    }
    host.addProcess(p);
    pids.push_back(pid);
  }
  lease::LeaseMeter meter(std::optional<std::uint64_t> max) {
    host.addCgroup(kLease, pids);
    writeFile(host.cgroupRoot() + kLease + "/memory.current", "4096000\n");
    proc.emplace(*fs::Root::open(host.procRoot()));
    sys.emplace(*fs::Root::open(host.sysRoot()));
    cg.emplace(*fs::Root::open(host.cgroupRoot()));
    leaseCg.emplace(std::move(*cgroup::Cgroup::open(*cg, kLease)));
    return lease::LeaseMeter(*proc, *sys, *leaseCg, max);
  }
  std::vector<pid_t> pids;
};

// A Strix Halo running ROCm on 6.12 (carve-out 512 MiB < GTT 112 GiB:
// apu_prefer_gtt): hipMalloc of 24 GiB is VRAM-flagged, placed in GTT, and
// shows twice -- KFD's vram_<gpuid> 24 GiB, and the render node's
// drm-resident-gtt 25,258,000 KiB (the 24 GiB plus 92,176 KiB of ROCm's own
// queues). The lease holds 25,258,000 KiB = 25,864,192,000 bytes; the old
// rule metered 25,864,192,000 + 24 GiB = 51,634,012,160 bytes. With
// gpu_memory_max 40 GB the bound must not fire at 25.9 GB.
TEST_F(MeterTruth, RocmOnAStrixHaloIsMeteredOnceSoItsBoundFiresAtTheDeclaredFigure) {
  device(kApu, "amdgpu", {1, 128},
         {{"gtt_total", 112 * GiB}, {"gtt_used", 25 * GiB}, {"vram_total", 512 * MiB}});
  process(600, 128, amdgpuFdinfo(3, kApu, 25'258'000, 0), 24 * GiB);
  const std::uint64_t max = 40'000'000'000;
  auto m = meter(max);
  m.sample();
  EXPECT_EQ(m.gpu().lastBytes, 25'864'192'000u);
  EXPECT_EQ(m.gpu().lastSource, "drm-fdinfo");
  EXPECT_EQ(m.gpu().lastKfdBytes, 24 * GiB);  // shown beside, never added
  EXPECT_EQ(m.gpu().lastRegions.at("gtt"), 25'864'192'000u);
  EXPECT_EQ(m.gpu().lastRegions.at("vram"), 0u);
  EXPECT_EQ(m.gpu().lastHostUncharged, 25'864'192'000u);
  EXPECT_EQ(m.gpu().samplesOverBudget, 0u) << "25.9 GB is under 40 GB";
  enforce::GpuBound bound{max, std::nullopt, enforce::Action::Kill, 1, 1'000'000};
  enforce::GpuBoundState state;
  auto step = enforce::step(bound, state, m.gpu().lastBytes, m.gpu().lastSource, 1);
  EXPECT_FALSE(step.kill);
}

// The same box past its declaration: 41 GB in GTT (40,039,063 KiB), 40 GB
// of it hipMalloc'd. Over 40 GB by the one figure, killed at the first sample
// with K = 1 -- at the declared figure, not at half of it.
TEST_F(MeterTruth, RocmOverItsDeclarationIsOverByTheSameRule) {
  device(kApu, "amdgpu", {1, 128},
         {{"gtt_total", 112 * GiB}, {"gtt_used", 41 * GiB}, {"vram_total", 512 * MiB}});
  process(601, 128, amdgpuFdinfo(4, kApu, 40'039'063, 0), 40'000'000'000);
  auto m = meter(40'000'000'000);
  m.sample();
  EXPECT_EQ(m.gpu().lastBytes, 40'039'063 * KiB);
  EXPECT_EQ(m.gpu().samplesOverBudget, 1u);
  enforce::GpuBound bound{40'000'000'000, std::nullopt, enforce::Action::Kill, 1, 1'000'000};
  enforce::GpuBoundState state;
  EXPECT_TRUE(enforce::step(bound, state, m.gpu().lastBytes, m.gpu().lastSource, 1).kill);
}

// The carve-out larger than GTT (96 GiB of VRAM set in the firmware, GTT
// 30 GiB: no apu_prefer_gtt): ROCm's 24 GiB lands in VRAM, fdinfo shows it as
// vram, KFD as vram_<gpuid>: still counted once, 24 GiB + 92,176 KiB of gtt.
TEST_F(MeterTruth, RocmInTheCarveOutIsCountedOnceToo) {
  device(kApu, "amdgpu", {1, 128},
         {{"gtt_total", 30 * GiB}, {"gtt_used", GiB}, {"vram_total", 96 * GiB}});
  process(602, 128, amdgpuFdinfo(5, kApu, 92'176, 24 * GiB / KiB), 24 * GiB);
  auto m = meter(std::nullopt);
  m.sample();
  EXPECT_EQ(m.gpu().lastBytes, 24 * GiB + 92'176 * KiB);
  EXPECT_EQ(m.gpu().lastHostUncharged, 92'176 * KiB);
}

// A discrete card: a 4 GiB KFD VRAM buffer evicted to GTT stays in
// vram_usage; fdinfo now shows 4 GiB of gtt and the 1 GiB left in VRAM.
// Counted once: 5 GiB.
TEST_F(MeterTruth, AKfdBufferEvictedToGttOnADiscreteCardIsCountedOnce) {
  device(kApu, "amdgpu", {1, 128},
         {{"gtt_total", 31 * GiB}, {"gtt_used", 4 * GiB}, {"vram_total", 16 * GiB}});
  process(603, 128, amdgpuFdinfo(6, kApu, 4 * GiB / KiB, GiB / KiB), 5 * GiB);
  auto m = meter(std::nullopt);
  m.sample();
  EXPECT_EQ(m.gpu().lastBytes, 5 * GiB);
  EXPECT_EQ(m.gpu().lastSource, "drm-fdinfo");
}

// Debian 12's 6.1 with ROCm whose buffers live in KFD's own VM (not in the
// render node's fdinfo): fdinfo shows 100 MiB of gtt, KFD 8 GiB. The floor
// raises the figure to 8 GiB -- never 8 GiB + 100 MiB -- and says so; before
// 6.10 ROCm's memory was the carve-out, so the excess is not host-uncharged.
TEST_F(MeterTruth, OnA61HostKfdIsTheFloorWhenFdinfoMissesItsBuffers) {
  writeFile(host.procRoot() + "/sys/kernel/osrelease", "6.1.0-57-amd64\n");
  device(kApu, "amdgpu", {1, 128},
         {{"gtt_total", 32 * GiB}, {"gtt_used", GiB}, {"vram_total", 512 * MiB}});
  process(604, 128, amdgpuFdinfo(7, kApu, 100 * 1024, 0), 8 * GiB);
  auto m = meter(std::nullopt);
  m.sample();
  EXPECT_EQ(m.gpu().lastBytes, 8 * GiB);
  EXPECT_EQ(m.gpu().lastSource, "drm-fdinfo+kfd-sysfs");
  EXPECT_EQ(m.gpu().lastHostUncharged, 100 * MiB);
  EXPECT_EQ(m.gpu().lastRegions.at("gtt"), 100 * MiB);
}

// nouveau and virtio_gpu print drm-driver and drm-client-id but no memory
// key: a lease holding one of their clients has an unknown GPU figure, with
// the driver named -- never 0, never a peak of 0.
TEST_F(MeterTruth, ADriverThatPrintsNoMemoryKeysMakesTheLeaseUnknown) {
  device("0000:01:00.0", "nouveau", {2, 130}, {});
  device("0000:00:02.0", "virtio_gpu", {3, 131}, {});
  process(605, 130,
          "pos:\t0\nflags:\t02\nmnt_id:\t24\nino:\t9\ndrm-driver:\tnouveau\n"
          "drm-client-id:\t8\ndrm-pdev:\t0000:01:00.0\n");
  process(606, 131,
          "pos:\t0\nflags:\t02\nmnt_id:\t24\nino:\t9\ndrm-driver:\tvirtio_gpu\n"
          "drm-client-id:\t2\ndrm-pdev:\t0000:00:02.0\n");
  auto m = meter(GiB);
  m.sample();
  EXPECT_EQ(m.gpu().samples, 1u);
  EXPECT_FALSE(m.gpu().lastBytes);
  EXPECT_FALSE(m.gpu().peakBytes);
  EXPECT_EQ(m.gpu().samplesIncomplete, 1u);
  EXPECT_EQ(m.gpu().lastUnknown, "a client of nouveau and virtio_gpu prints no memory figures");
}

// An i915 DG2: the client prints local0 (device memory) beside system0,
// whose bytes are partly TTM pool pages no memcg sees: host-mixed, counted.
// 2 GiB of local0 + 300 MiB of system0 = 2,462,056,448 bytes.
TEST_F(MeterTruth, AnI915Dg2CountsItsSystemRegionAsHostMixed) {
  device("0000:03:00.0", "i915", {4, 132}, {});
  process(607, 132,
          "drm-driver:\ti915\ndrm-client-id:\t11\ndrm-pdev:\t0000:03:00.0\n"
          "drm-total-system0:\t307200 KiB\ndrm-resident-system0:\t307200 KiB\n"
          "drm-total-local0:\t2097152 KiB\ndrm-resident-local0:\t2097152 KiB\n"
          "drm-total-stolen-local0:\t0\ndrm-resident-stolen-local0:\t0\n");
  auto m = meter(std::nullopt);
  m.sample();
  EXPECT_EQ(m.gpu().lastBytes, 2'462'056'448u);
  EXPECT_EQ(m.gpu().lastClasses.at("system0"), devices::MemoryClass::HostMixed);
  EXPECT_EQ(m.gpu().lastHostUncharged, 0u);
}

}  // namespace
}  // namespace tally
