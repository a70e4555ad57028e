// The doctor's kernel charge section: which devices the attached programs
// cover (registered as the host shows them, or not), the counters of what
// they could not do exactly (only nonzero ones said), their room, the fixed
// sentence of what the bound never sees, and the charge probe's lines and
// exit status as the report renders them.
#include "doctor/kernel_bound.h"

#include <gtest/gtest.h>

#include <cerrno>

#include "bpf/gpu_charge_abi.h"
#include "doctor/report.h"

namespace tally {
namespace {

using bpf::DeviceRule;
constexpr std::int64_t MiB = 1 << 20;

devices::DrmDevice device(const std::string& key, const std::string& driver, std::uint32_t card,
                          std::uint32_t render) {
  devices::DrmDevice d;
  d.key = key;
  d.driver = driver;
  d.nodes = {{devices::kDrmMajor, card, "card" + std::to_string(card)},
             {devices::kDrmMajor, render, "renderD" + std::to_string(render)}};
  return d;
}

std::vector<DeviceRule> rules(std::uint32_t card, std::uint32_t render, std::uint32_t kind,
                              bool charged) {
  return {{devices::kDrmMajor, card, kind, charged}, {devices::kDrmMajor, render, kind, charged}};
}

TEST(KernelBound, EachDeviceSaysWhatTheAttachedProgramsDoWithIt) {
  devices::DeviceMap map;
  map.devices = {device("0000:03:00.0", "radeon", 1, 129), device("0000:c6:00.0", "amdgpu", 0, 128),
                 device("fe00000.v3d", "v3d", 2, 130)};
  std::vector<DeviceRule> expected = rules(1, 129, TALLY_DEVICE_OTHER_DRM, true);
  for (auto r : rules(0, 128, TALLY_DEVICE_AMDGPU, true)) expected.push_back(r);
  for (auto r : rules(2, 130, TALLY_DEVICE_OTHER_DRM, false)) expected.push_back(r);
  expected.push_back({510, 0, TALLY_DEVICE_KFD, false});

  auto all = doctor::judgeDevices(map, expected, expected, true);
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0].device, "0000:03:00.0");
  EXPECT_EQ(all[0].driver, "radeon");
  EXPECT_EQ(all[0].coverage, "charged-not-decoded");
  EXPECT_EQ(all[0].says,
            "charged, allocations not decoded (radeon/nouveau: the sampled kill bounds them); "
            "dumb buffers refused");
  EXPECT_EQ(all[1].driver, "amdgpu");
  EXPECT_EQ(all[1].coverage, "charged-and-refused");
  EXPECT_EQ(all[1].says, "covered: charged and refused (GEM_CREATE, dumb buffers)");
  EXPECT_EQ(all[1].registered, true);
  EXPECT_EQ(all[1].nodes, (std::vector<std::string>{"card0", "renderD128"}));
  EXPECT_EQ(all[2].coverage, "memcg");
  EXPECT_EQ(all[2].says, "memcg charges it (shmem driver): a lease's MemoryMax bounds it");
  EXPECT_EQ(all[3].device, "/dev/kfd");
  EXPECT_EQ(all[3].coverage, "charged-and-refused");
  EXPECT_EQ(all[3].says,
            "covered: ALLOC_MEMORY_OF_GPU refused at the bound; its buffers are charged as its "
            "GPU's objects");

  // A GPU that appeared after the programs were loaded: not registered yet.
  std::vector<DeviceRule> registered(expected.begin() + 2, expected.end());
  auto later = doctor::judgeDevices(map, expected, registered, true);
  EXPECT_EQ(later[0].registered, false);
  EXPECT_EQ(later[0].coverage, "not-registered");
  EXPECT_EQ(later[0].says,
            "not registered (card1, renderD129): the attached programs do not see it; restart "
            "the daemon or wait for its rescan");
  EXPECT_EQ(later[1].registered, true);

  // Registered as another driver than the host shows now.
  registered = expected;
  registered[2].kind = TALLY_DEVICE_OTHER_DRM;
  auto stale = doctor::judgeDevices(map, expected, registered, true);
  EXPECT_EQ(stale[1].coverage, "not-registered");
  EXPECT_NE(stale[1].says.find("card0 as objects charged, no allocation decoded (the host shows "
                               "amdgpu's allocations decoded)"),
            std::string::npos)
      << stale[1].says;

  // No programs attached: what they would do, registration unknown.
  auto unattached = doctor::judgeDevices(map, expected, std::nullopt, false);
  EXPECT_FALSE(unattached[1].registered);
  EXPECT_EQ(unattached[1].coverage, "charged-not-refused");
  EXPECT_EQ(
      unattached[1].says,
      "charged (GEM_CREATE, dumb buffers decoded); not refused: refusing is off (no BPF LSM)");
}

TEST(KernelBound, OnlyNonzeroCountersAreSaidWithWhatFollows) {
  bpf::Totals t;
  t.objects = 12;
  t.objectsCapacity = 1 << 20;
  t.objectsPerLease = 65536;
  t.leasesCapacity = 16384;
  t.recursionMisses = 0;
  EXPECT_TRUE(doctor::counterLines(t).empty());
  t.unseenObjects = 2;
  t.eventsDropped = 5;
  auto lines = doctor::counterLines(t);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].name, "unseen_objects");
  EXPECT_EQ(lines[0].value, 2u);
  EXPECT_NE(lines[0].says.find("stay charged to the lease until it ends"), std::string::npos);
  EXPECT_EQ(lines[1].name, "events_dropped");
  EXPECT_EQ(doctor::roomWords(t), "12 objects of 1048576 (65536 per lease at most), 16384 leases");
  EXPECT_FALSE(doctor::roomWarning(t));
  t.objects = t.objectsCapacity - 10;
  EXPECT_TRUE(doctor::roomWarning(t));
}

// The section as doctor prints it, attached: devices, counters, room, the
// sentence; then the probe's paths, and what they do to the exit status.
TEST(KernelBound, TheSectionRendersWhatWasRead) {
  doctor::Report r;
  auto& kc = r.kernelCharge;
  kc.verdict.can = {true, true};
  kc.pinned = true;
  kc.devicesRead = true;
  devices::DeviceMap map;
  map.devices = {device("0000:c6:00.0", "amdgpu", 0, 128)};
  auto expected = rules(0, 128, TALLY_DEVICE_AMDGPU, true);
  kc.devices = doctor::judgeDevices(map, expected, expected, true);
  bpf::Totals t;
  t.objects = 3;
  t.objectsCapacity = 1 << 20;
  t.objectsPerLease = 65536;
  t.leasesCapacity = 16384;
  t.recursionMisses = 0;
  t.staleObjects = 1;
  kc.totals = t;
  coverage::ChargeProbeResult p;
  p.outcome = coverage::ChargeProbeOutcome::Ran;
  p.bytes = 64 * MiB;
  p.cgroup = "/tally-charge-probe-7";
  p.source = "the daemon's, attached now (pinned under /sys/fs/bpf/tally)";
  p.refusing = true;
  coverage::PathResult gtt;
  gtt.path = coverage::ChargePath::AmdgpuGtt;
  gtt.present = true;
  gtt.device = "0000:c6:00.0";
  gtt.node = "/dev/dri/renderD128";
  gtt.requestedBytes = 64 * MiB;
  gtt.charge = 64 * MiB;
  gtt.fdinfo = {64 * MiB, "drm-total-gtt", ""};
  gtt.memInfo = {64 * MiB, "mem_info_gtt_used+mem_info_vram_used", ""};
  gtt.tryRc = 0;  // not refused: a finding
  gtt.boundBytes = 96 * MiB;
  gtt.chargeAtBound = 64 * MiB;
  gtt.chargeAfterTry = 128 * MiB;
  coverage::PathResult xe;
  xe.path = coverage::ChargePath::Xe;
  xe.notPresent = "no xe device";
  p.paths = {gtt, xe};
  kc.probe = p;

  std::string text = doctor::renderText(r);
  for (const char* want : {
           "kernel charge charging and refusing in the kernel (BPF)\n",
           "             device 0000:c6:00.0 (amdgpu; card0, renderD128): covered: charged and "
           "refused (GEM_CREATE, dumb buffers)\n",
           "             stale_objects 1: releases missed",
           "             room: 3 objects of 1048576 (65536 per lease at most), 16384 leases\n",
           "             not seen by the kernel charge: memory a driver allocates without a GEM "
           "object",
           "charge probe 67108864 bytes per path in /tally-charge-probe-7; programs the daemon's, "
           "attached now (pinned under /sys/fs/bpf/tally)\n",
           "             amdgpu GEM_CREATE (GTT) on 0000:c6:00.0 (/dev/dri/renderD128): charged "
           "exactly: charge 67108864 = fdinfo 67108864 (drm-total-gtt); mem_info 67108864 "
           "(mem_info_gtt_used+mem_info_vram_used); not refused: the driver made it (charge "
           "67108864 + 67108864 over bound 100663296)\n",
           "             xe GEM_CREATE: not present (no xe device)\n",
       })
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n---\n" << text;

  auto j = doctor::renderJson(r);
  const auto& k = j["kernel_charge"];
  EXPECT_EQ(k["devices"][0]["coverage"], "charged-and-refused");
  EXPECT_EQ(k["devices"][0]["registered"], true);
  EXPECT_EQ(k["counters"]["stale_objects"], 1);
  EXPECT_EQ(k["counters"]["recursion_misses"], 0);
  EXPECT_EQ(k["room"]["objects_capacity"], 1 << 20);
  EXPECT_EQ(k["not_seen"], doctor::kKernelBoundDoesNotSee);
  EXPECT_EQ(k["probe"]["paths"][0]["refusal"], "not-refused");
  EXPECT_EQ(k["probe"]["paths"][1]["present"], false);

  // Not attached and not run: the probe is offered, nothing is read.
  doctor::Report off;
  off.kernelCharge.verdict.can = {true, true};
  EXPECT_NE(doctor::renderText(off).find("charge probe not run (tally doctor --active runs it)\n"),
            std::string::npos);
  EXPECT_TRUE(doctor::renderJson(off)["kernel_charge"]["probe"].is_null());
  // Off, never asked: nothing but the verdict (the fixture trees' golden reports).
  doctor::Report none;
  none.kernelCharge.verdict.why = "the kernel has no BTF";
  std::string quiet = doctor::renderText(none);
  EXPECT_EQ(quiet.find("charge probe"), std::string::npos);
  EXPECT_EQ(quiet.find("not seen by the kernel charge"), std::string::npos);
}

// A finding is degraded (exit 1), a path that could not be probed a check
// that could not run (exit 2); unavailable is reported, unless required.
TEST(KernelBound, TheProbeDecidesTheExitStatusAsDocumented) {
  coverage::PathResult ok;
  ok.path = coverage::ChargePath::TestDrm;
  ok.present = true;
  ok.device = "tally_testdrm";
  ok.requestedBytes = 64 * MiB;
  ok.charge = 64 * MiB;
  ok.fdinfo = {64 * MiB, "drm-total-gtt", ""};
  ok.tryRc = -ENOMEM;
  ok.refusedDelta = 1;
  ok.chargeAtBound = ok.chargeAfterTry = 64 * MiB;
  coverage::ChargeProbeResult p;
  p.outcome = coverage::ChargeProbeOutcome::Ran;
  p.refusing = true;
  p.paths = {ok};
  auto h = doctor::judgeChargeProbe(p, true);
  EXPECT_TRUE(h.degraded.empty());
  EXPECT_FALSE(h.checkFailed);

  auto differs = ok;
  differs.charge = 32 * MiB;
  p.paths = {ok, differs};
  h = doctor::judgeChargeProbe(p, false);
  ASSERT_EQ(h.degraded.size(), 1u);
  EXPECT_EQ(h.degraded[0].rfind("kernel charge: tally_testdrm CREATE on tally_testdrm: differs by "
                                "33554432 bytes",
                                0),
            0u)
      << h.degraded[0];
  EXPECT_FALSE(h.checkFailed);

  auto failed = ok;
  failed.failed = "the probe's child did not answer";
  p.paths = {failed};
  EXPECT_TRUE(doctor::judgeChargeProbe(p, false).checkFailed);

  coverage::ChargeProbeResult off;
  off.outcome = coverage::ChargeProbeOutcome::Unavailable;
  off.detail = "off: the kernel has no BTF";
  EXPECT_FALSE(doctor::judgeChargeProbe(off, false).checkFailed) << "reported, not a failure";
  EXPECT_TRUE(doctor::judgeChargeProbe(off, true).checkFailed) << "unless required";
  p.paths = {ok};
  p.refusing = false;
  EXPECT_TRUE(doctor::judgeChargeProbe(p, true).checkFailed) << "refusing off: not proven";
}

}  // namespace
}  // namespace tally
