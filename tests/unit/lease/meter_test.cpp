// The lease meter on a synthetic host: exact GPU sums per sample, peaks, and
// samples whose sum is unknown kept out of the peak.
#include "lease/meter.h"

#include <gtest/gtest.h>

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
    return lease::LeaseMeter(*proc, *sys, *cg, *leaseCg, budget);
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

}  // namespace
}  // namespace tally
