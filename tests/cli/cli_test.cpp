// The tally binary end to end on a synthetic tree: --proc-root/--sys-root/
// --cgroup-root give the exact per-process, per-cgroup and per-device figures.
// The other commands as an operator meets them (config check, lease show,
// the ledger, a silent or refusing daemon): cli_commands_test.cpp.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cgroup/cgroup.h"
#include "cli_fixture.h"
#include "lease/meter.h"
#include "support/fake_host.h"
#include "support/process.h"
#include "support/scenario.h"

namespace tally {
namespace {

using namespace tally::testing;
using json = nlohmann::json;
using namespace tally::clitest;

struct Run {
  int status = -1;
  std::string out;
};

Run runTally(const std::string& args) {
  std::string cmd = std::string(TALLY_BINARY) + " " + args + " 2>/dev/null";
  Run r;
  FILE* f = ::popen(cmd.c_str(), "r");
  if (f == nullptr) return r;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) r.out.append(buf, n);
  int st = ::pclose(f);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

TEST_F(Cli, GpuJsonExactFigures) {
  auto r = runTally("gpu --json " + roots());
  ASSERT_EQ(r.status, 0) << r.out;
  auto doc = json::parse(r.out);
  EXPECT_EQ(doc["schema"], 1);
  EXPECT_GT(doc["observed_at_ns"].get<std::uint64_t>(), 0u);
  EXPECT_EQ(doc["host"]["mem_available_bytes"], kMemAvailable);
  EXPECT_EQ(doc["host"]["ttm_modules"],
            json::parse(R"([{"module": "ttm", "pages_limit_pages": 25165824,
                             "pages_limit_bytes": 103079215104, "holders": []}])"));
  EXPECT_EQ(doc["host"]["warnings"], json::array());

  const auto& amd = byKey(doc["devices"], "pdev", kAmdBdf);
  EXPECT_EQ(amd["driver"], "amdgpu");
  EXPECT_EQ(amd["minors"], json({1, 128}));
  EXPECT_EQ(amd["memory"]["gtt"]["total_bytes"], kGttTotal);
  EXPECT_EQ(amd["memory"]["gtt"]["used_bytes"], kGttUsed);
  const std::uint64_t gtt = 4 * kGiB + 1 * kMiB + 2 * kGiB + 8 * kMiB + 4 * kMiB;
  const std::uint64_t vram = 512 * kMiB + 2 * kMiB;
  EXPECT_EQ(amd["attributed"]["gtt"]["resident_bytes"], gtt);
  EXPECT_EQ(amd["attributed"]["vram"]["resident_bytes"], vram);
  EXPECT_EQ(amd["unattributed"]["gtt"]["resident_bytes"],
            static_cast<std::int64_t>(kGttUsed - gtt));
  EXPECT_EQ(amd["unattributed"]["vram"]["resident_bytes"],
            static_cast<std::int64_t>(kVramUsed - vram));
  EXPECT_EQ(amd["gtt_ceiling"]["graphics"],
            json({{"bytes", 96 * kGiB}, {"source", "mem_info_gtt_total (bytes)"}}));
  // ROCm's caps: the GTT manager (96 GiB), KFD's TTM limit (pages_limit, 96
  // GiB) and KFD's system limit on this 125 GiB host (MemTotal 131072000 kB:
  // 125 GiB - 125 GiB/64 - 1.5 GiB = 130509963264 bytes); the first of the
  // two smallest names it.
  const auto& compute = amd["gtt_ceiling"]["compute"];
  EXPECT_EQ(compute["bytes"], 96 * kGiB);
  EXPECT_EQ(compute["source"], "GTT manager: mem_info_gtt_total (bytes)");
  ASSERT_EQ(compute["terms"].size(), 3u);
  EXPECT_EQ(compute["terms"][1]["source"], "ttm.pages_limit = 25165824 pages of 4096 bytes");
  EXPECT_EQ(compute["terms"][2]["bytes"], 130509963264u);
  EXPECT_EQ(amd["rocm_device_memory"]["where"], "gtt");  // 4 GiB carve-out < 96 GiB GTT
  EXPECT_EQ(amd["gtt_ceiling"]["ttm_module"], "ttm");
  EXPECT_EQ(amd["gtt_headroom_bytes"], kMemAvailable);  // min(86 GiB free GTT, MemAvailable)
  EXPECT_EQ(amd["gtt_headroom_ceiling"], "graphics");   // equal ceilings: graphics
  const auto& xe = byKey(doc["devices"], "pdev", kXeBdf);
  EXPECT_EQ(xe["attributed"]["gtt"]["resident_bytes"], 192 * kKiB);
  EXPECT_FALSE(xe.contains("gtt_headroom_bytes"));
  EXPECT_TRUE(xe.contains("gtt_headroom_unknown"));

  const auto& p100 = byKey(doc["processes"], "pid", 100);
  EXPECT_EQ(p100["comm"], "llama-server");
  EXPECT_EQ(p100["container"]["kind"], "systemd-unit");
  EXPECT_EQ(p100["regions"]["gtt"]["resident_bytes"], 4 * kGiB + 1 * kMiB);
  EXPECT_EQ(p100["regions"]["gtt"]["total_bytes"], 4 * kGiB + 1 * kMiB);
  EXPECT_EQ(p100["regions"]["vram"]["resident_bytes"], 512 * kMiB);
  const auto& p200 = byKey(doc["processes"], "pid", 200);
  EXPECT_EQ(p200["nspid"], json({200, 1}));
  EXPECT_EQ(p200["container"]["kind"], "podman");
  EXPECT_EQ(p200["container"]["id"], kPodId);
  EXPECT_EQ(p200["regions"]["gtt"]["resident_bytes"], 2 * kGiB + 192 * kKiB);

  const auto& llama = byKey(doc["cgroups"], "path", "/system.slice/llama.service");
  EXPECT_EQ(llama["regions"]["gtt"]["resident_bytes"], 4 * kGiB + 1 * kMiB);
  EXPECT_EQ(llama["clients"], 2);
  const auto& pod = byKey(doc["containers"], "name", "podman:4f2a9c1e8b7d");
  EXPECT_EQ(pod["regions"]["gtt"]["resident_bytes"], 2 * kGiB + 192 * kKiB);
  EXPECT_EQ(doc["unreadable"], json::array());
}

TEST_F(Cli, GpuCgroupScope) {
  auto r = runTally("gpu --json --cgroup /system.slice/llama.service " + roots());
  ASSERT_EQ(r.status, 0);
  auto doc = json::parse(r.out);
  EXPECT_EQ(doc["scope"]["kind"], "cgroup");
  EXPECT_EQ(doc["scope"]["path"], "/system.slice/llama.service");
  ASSERT_EQ(doc["processes"].size(), 2u);
  EXPECT_EQ(doc["processes"][0]["regions"]["gtt"]["resident_bytes"], 4 * kGiB + 1 * kMiB);
  EXPECT_EQ(doc["processes"][1]["cgroup"], "/system.slice/llama.service/worker");
}

// Each region is classed by the driver that printed it, and counted_bytes
// (per client, process, cgroup and scope) follows the classes: xe's vram0 and
// gtt count; i915's system0 is shmem, already in memory.current, and does not.
TEST_F(Cli, CountedBytesFollowEachDriversMemoryClasses) {
  host.addDevice({"0000:00:02.0", "i915", {3, 130}, {}, true});
  FakeProcess igpu{900, "glxgears", "/user.slice/igpu.scope", "", 90, {}, 1000, {}, false};
  igpu.fds = {{3, 130u, "",
               readFile(std::string(TALLY_FIXTURE_DIR) + "/fdinfo/i915-manpages-patch.fdinfo"),
               false}};
  host.addProcess(igpu);
  auto r = runTally("gpu --json " + roots());
  ASSERT_EQ(r.status, 0) << r.out;
  auto doc = json::parse(r.out);
  const auto& p200 = byKey(doc["processes"], "pid", 200);
  const json* xe = nullptr;
  for (const auto& c : p200["clients"])
    if (c["driver"] == "xe") xe = &c;
  ASSERT_NE(xe, nullptr);
  EXPECT_EQ((*xe)["regions"]["vram0"]["class"], "device");
  EXPECT_EQ((*xe)["regions"]["gtt"]["class"], "host-uncharged");
  EXPECT_EQ((*xe)["regions"]["system"]["class"], "host-uncharged");
  EXPECT_EQ((*xe)["regions"]["stolen"]["class"], "other");
  EXPECT_EQ((*xe)["counted_bytes"], (23992 + 192) * kKiB);            // vram0 + gtt
  EXPECT_EQ(p200["counted_bytes"], 2 * kGiB + (23992 + 192) * kKiB);  // its amdgpu GTT too

  const auto& p900 = byKey(doc["processes"], "pid", 900);
  EXPECT_EQ(p900["regions"]["system0"]["resident_bytes"], 6044 * kKiB);  // shown
  EXPECT_EQ(p900["regions"]["system0"]["class"], "host-charged");
  EXPECT_EQ(p900["regions"]["stolen-system0"]["class"], "other");
  EXPECT_EQ(p900["counted_bytes"], 0);  // not added: memory.current already has it
  EXPECT_EQ(byKey(doc["cgroups"], "path", "/user.slice/igpu.scope")["counted_bytes"], 0);
}

// The lease meter and `tally gpu` give one number for one cgroup: the same
// function counts both (gpumem/gpu_memory.h).
TEST_F(Cli, TheLeaseMeterAndTallyGpuAgreeOnACgroup) {
  const std::string lease = "/system.slice/llama.service";
  writeFile(host.cgroupRoot() + lease + "/memory.current", "4096\n");
  auto r = runTally("gpu --json --cgroup " + lease + " " + roots());
  ASSERT_EQ(r.status, 0) << r.out;
  auto doc = json::parse(r.out);
  auto proc = fs::Root::open(host.procRoot());
  auto sys = fs::Root::open(host.sysRoot());
  auto cgRoot = fs::Root::open(host.cgroupRoot());
  ASSERT_TRUE(proc && sys && cgRoot);
  auto cg = cgroup::Cgroup::open(*cgRoot, lease);
  ASSERT_TRUE(cg) << cg.error().message;
  lease::LeaseMeter meter(*proc, *sys, *cg, std::nullopt);
  meter.sample();
  ASSERT_TRUE(meter.gpu().lastBytes) << meter.gpu().lastError.value_or("");
  // llama-server's two amdgpu clients (amd#10 shared with the worker, amd#11).
  EXPECT_EQ(*meter.gpu().lastBytes, 4 * kGiB + 1 * kMiB + 512 * kMiB);
  EXPECT_EQ(doc["scope"]["counted_bytes"], *meter.gpu().lastBytes);
}

// GPUActive (7.1+) is the kernel's own count of GPU pages: tally gpu puts it
// beside what every client's fdinfo shows, and says what no client holds.
TEST_F(Cli, GpuActiveIsShownBesideTheClientsFigure) {
  writeFile(host.procRoot() + "/meminfo",
            fmt::format("MemTotal:       131072000 kB\nMemAvailable:   {} kB\n"
                        "GPUActive:      16777216 kB\nGPUReclaim:     1024 kB\n",
                        kMemAvailable / 1024));
  auto r = runTally("gpu --json " + roots());
  ASSERT_EQ(r.status, 0) << r.out;
  auto host_ = json::parse(r.out)["host"];
  EXPECT_EQ(host_["gpu_active_bytes"], 16 * kGiB);
  EXPECT_EQ(host_["gpu_reclaim_bytes"], 1 * kMiB);
  // Every client's GTT once (amdgpu as in GpuJsonExactFigures, xe's 192 KiB).
  const std::uint64_t clients = 4 * kGiB + 1 * kMiB + 2 * kGiB + 8 * kMiB + 4 * kMiB + 192 * kKiB;
  EXPECT_EQ(host_["clients_host_uncharged_bytes"], clients);
  EXPECT_EQ(host_["gpu_active_outside_clients_bytes"],
            static_cast<std::int64_t>(16 * kGiB) - static_cast<std::int64_t>(clients));
  auto table = runTally("gpu " + roots());
  EXPECT_NE(table.out.find("GPUActive 16.0 GiB (the kernel's count, all GPUs)"), std::string::npos)
      << table.out;
  // Without the line (before 7.1): absent, never 0.
  host.setMemAvailable(kMemAvailable);
  auto old = json::parse(runTally("gpu --json " + roots()).out)["host"];
  EXPECT_FALSE(old.contains("gpu_active_bytes"));
}

TEST_F(Cli, GpuTables) {
  auto r = runTally("gpu " + roots());
  ASSERT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("llama-server"), std::string::npos);
  EXPECT_NE(r.out.find("4.0 GiB"), std::string::npos);
  EXPECT_NE(r.out.find("  GTT ceiling: graphics 96.0 GiB (mem_info_gtt_total (bytes)); compute "
                       "(ROCm) 96.0 GiB (GTT manager: mem_info_gtt_total (bytes))\n"
                       "    compute cap: GTT manager 96.0 GiB (mem_info_gtt_total (bytes))\n"
                       "    compute cap: KFD TTM limit 96.0 GiB (ttm.pages_limit = 25165824 pages "
                       "of 4096 bytes)\n"
                       "    compute cap: KFD system limit 121.5 GiB (MemTotal 125.0 GiB - "
                       "MemTotal/64 - 1.5 GiB, KFD 6.7 and later)\n"
                       "  ROCm device memory (hipMalloc): GTT (mem_info_vram_total 4.0 GiB < "
                       "mem_info_gtt_total 96.0 GiB"),
            std::string::npos)
      << r.out;
  r = runTally("gpu --by container " + roots());
  ASSERT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("podman:4f2a9c1e8b7d"), std::string::npos);
  EXPECT_NE(r.out.find("unit:llama.service"), std::string::npos);
  r = runTally("gpu --by cgroup " + roots());
  ASSERT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("/system.slice/systemd-logind.service"), std::string::npos);
}

// Any local user names her process (prctl, exec) and her cgroups: root's
// `tally gpu` and `tally doctor` show those names, never obey them (an OSC
// title, a screen clear, a zero-width joiner that makes one name read as
// another).
TEST_F(Cli, GpuTablesShowHostileNamesEscapedNeverObeyed) {
  FakeProcess p{900,
                "\x1b]0;pwned\x07\x1b[2J",
                "/user.slice/e\x1b[31mvil\xe2\x80\x8d.scope",
                "",
                80,
                {},
                1000,
                {},
                false};
  p.fds = {{3, 128u, "", amdgpuFdinfo(90, kAmdBdf, 1024, 0), false}};
  host.addProcess(p);
  for (const char* by : {"", " --by cgroup", " --by container"}) {
    auto r = runTally(std::string("gpu") + by + " " + roots());
    ASSERT_EQ(r.status, 0) << by;
    EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << by << r.out;
    EXPECT_EQ(r.out.find('\x07'), std::string::npos) << by << r.out;
    EXPECT_EQ(r.out.find("\xe2\x80\x8d"), std::string::npos) << by << r.out;
    EXPECT_NE(r.out.find("llama"), std::string::npos) << by << r.out;  // the rest still shown
  }
  auto r = runTally("gpu " + roots());
  EXPECT_NE(r.out.find("\\u{001B}]0;pwned\\u{0007}\\u{001B}[2J"), std::string::npos) << r.out;
  r = runTally("gpu --by cgroup " + roots());
  EXPECT_NE(r.out.find("e\\u{001B}[31mvil\\u{200D}.scope"), std::string::npos) << r.out;
}

// The table an operator reads: a TOTAL row per device, '*' on a process whose
// client is shared with another (counted once, in its owner's row), and long
// names and cgroup paths cut with '…' so the columns stay where the header is.
TEST_F(Cli, GpuTableTotalsSharedMarksAndAlignedColumns) {
  std::string deep = "/machine.slice/libpod-" + std::string(64, 'e') + ".scope/container/app";
  FakeProcess longOne{950, "a-process-with-a-long-name", deep, "", 95, {}, 1000, {}, false};
  longOne.fds = {{3, 128u, "",
                  "drm-driver:\tamdgpu\ndrm-pdev:\t0000:c6:00.0\ndrm-client-id:\t99\n"
                  "drm-resident-gtt:\t1024 KiB\n",
                  false}};
  host.addProcess(longOne);
  auto r = runTally("gpu " + roots());
  ASSERT_EQ(r.status, 0) << r.out;
  std::istringstream lines(r.out);
  std::vector<std::string> rows;
  std::string header;
  for (std::string l; std::getline(lines, l);) {
    if (l.rfind("     PID", 0) == 0) header = l;
    if (!header.empty() && l != header && !l.empty() && l[0] == ' ') rows.push_back(l);
  }
  ASSERT_FALSE(header.empty()) << r.out;
  std::size_t clientsEnd = header.find("CLIENTS") + 7;
  bool sawTotal = false, sawShared = false;
  for (const auto& l : rows) {
    // Every row's CLIENTS figure ends under the header's (in display columns).
    std::size_t columns = 0, i = 0;
    for (; i < l.size() && columns < clientsEnd; ++i)
      columns += (static_cast<unsigned char>(l[i]) & 0xC0) != 0x80;
    EXPECT_TRUE(i == l.size() || l[i] == ' ') << "misaligned row:\n" << header << "\n" << l;
    sawTotal = sawTotal || l.find("TOTAL " + std::string(kAmdBdf)) != std::string::npos;
    sawShared = sawShared || l.find("*llama-server") != std::string::npos;
  }
  EXPECT_TRUE(sawTotal) << r.out;
  EXPECT_TRUE(sawShared) << r.out;
  EXPECT_NE(r.out.find("a-process-with-…"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("* = holds a DRM client shared with another process"), std::string::npos);
  auto byCgroup = runTally("gpu --by cgroup " + roots());
  EXPECT_NE(byCgroup.out.find("…" + deep.substr(deep.size() - 47)), std::string::npos)
      << byCgroup.out;
}

TEST_F(Cli, NoDrmDevicesIsAStateNotAnError) {
  TempDir emptySys;
  auto r = runTally("gpu --json --proc-root " + host.procRoot() + " --sys-root " + emptySys.path());
  ASSERT_EQ(r.status, 0);
  auto doc = json::parse(r.out);
  EXPECT_EQ(doc["status"], "no-drm-devices");
  EXPECT_EQ(doc["devices"], json::array());
}

// The real /proc and /sys of the machine running the suite: a valid document,
// and on a machine without DRM (this project's CI) the explicit state.
TEST(CliLive, HostDocumentIsValid) {
  auto r = runTally("gpu --json");
  ASSERT_EQ(r.status, 0);
  auto doc = json::parse(r.out);
  EXPECT_EQ(doc["schema"], 1);
  EXPECT_EQ(doc["scope"]["kind"], "host");
  const bool drm = ::access("/sys/class/drm", F_OK) == 0 && !doc["devices"].empty();
  EXPECT_EQ(doc["status"], drm ? "ok" : "no-drm-devices");
  for (const char* key : {"devices", "processes", "cgroups", "containers", "unreadable"})
    EXPECT_TRUE(doc[key].is_array()) << key;
  EXPECT_TRUE(doc["host"].contains("mem_available_bytes"));
}

TEST_F(Cli, ErrorsAndExitCodes) {
  EXPECT_EQ(runTally("gpu --by nonsense " + roots()).status, 2);
  EXPECT_EQ(runTally("no-such-command").status, 2);
  EXPECT_EQ(runTally("").status, 2);
  EXPECT_EQ(runTally("gpu --proc-root /nonexistent/proc").status, 3);
  EXPECT_EQ(runTally("gpu --cgroup /missing.scope " + roots()).status, 3);
  EXPECT_EQ(runTally("--help").status, 0);
  EXPECT_EQ(runTally("gpu --help").status, 0);
}

TEST_F(Cli, DoctorOnV2HostWithSystemd) {
  writeFile(host.procRoot() + "/1/comm", "systemd\n");
  writeFile(host.procRoot() + "/sys/kernel/osrelease", "6.12.9-amd64\n");
  writeFile(host.cgroupRoot() + "/cgroup.controllers",
            "cpuset cpu io memory hugetlb pids rdma misc\n");
  writeFile(host.cgroupRoot() + "/cgroup.subtree_control", "cpu io memory pids\n");
  auto r = runTally("doctor --json " + roots());
  // Containable, and the GTT MemoryMax does not cover is bounded by tally:
  // today's normal AMD state is healthy (0); the verdict says who bounds what.
  EXPECT_EQ(r.status, 0) << r.out;
  auto doc = json::parse(r.out);
  EXPECT_EQ(doc["kernel"]["release"], "6.12.9-amd64");
  EXPECT_EQ(doc["cgroup"]["memory_delegated"], true);
  EXPECT_EQ(doc["degraded"], json::array());
  EXPECT_EQ(doc["verdict"], "A lease's MemoryMax covers: host memory only");
  EXPECT_NE(doc["gtt_memcg_coverage"]["basis"].get<std::string>().find(
                "tally bounds GTT itself (gpu_memory_max, from DRM fdinfo)"),
            std::string::npos);

  EXPECT_EQ(doc["cgroup"]["memory_controller"], "cgroup v2");
  EXPECT_EQ(doc["gpu_devices"].size(), 2u);
  EXPECT_EQ(byKey(doc["gpu_devices"], "key", kAmdBdf)["gtt_ceiling"]["compute"]["bytes"],
            96 * kGiB);
  EXPECT_EQ(doc["gtt_warnings"], json::array());
}

// amdgpu.gttsize=131072 with TTM's default pages_limit (RAM/2, here 64 GiB):
// sysfs shows 128 GiB of GTT, ROCm gets 64 (the smallest of its three caps).
// Both commands give the compute ceiling, measure headroom against it, and
// advise a pages_limit no higher than KFD's system limit (121.5 GiB here:
// 31,862,784 pages, not the 33,554,432 of 128 GiB).
TEST_F(Cli, GttsizeAloneIsNotRocmsCeilingAndBothCommandsSaySo) {
  writeFile(host.sysRoot() + "/devices/pci0000:00/" + kAmdBdf + "/mem_info_gtt_total",
            fmt::format("{}\n", 128 * kGiB));
  host.setModuleParam("ttm", "pages_limit", "16777216");
  host.setModuleParam("amdgpu", "gttsize", "131072");
  auto r = runTally("gpu --json " + roots());
  ASSERT_EQ(r.status, 0) << r.out;
  auto doc = json::parse(r.out);
  const auto& amd = byKey(doc["devices"], "pdev", kAmdBdf);
  EXPECT_EQ(amd["gtt_ceiling"]["graphics"]["bytes"], 128 * kGiB);
  EXPECT_EQ(amd["gtt_ceiling"]["compute"]["bytes"], 64 * kGiB);
  EXPECT_EQ(amd["gtt_ceiling"]["headroom_uses"], "compute");
  EXPECT_EQ(amd["gtt_headroom_bytes"], 54 * kGiB);  // 64 - 10 used, below MemAvailable
  EXPECT_EQ(amd["gtt_headroom_ceiling"], "compute");
  EXPECT_EQ(doc["host"]["amdgpu_gttsize_mib"], 131072);
  ASSERT_EQ(doc["host"]["warnings"].size(), 1u);
  const std::string warning = doc["host"]["warnings"][0];
  EXPECT_NE(warning.find("It sizes the GTT manager (mem_info_gtt_total), which caps graphics and "
                         "ROCm alike; ROCm is also capped by the KFD TTM limit (64.0 GiB"),
            std::string::npos)
      << warning;
  EXPECT_NE(warning.find("ttm.pages_limit=31862784"), std::string::npos) << warning;
  EXPECT_EQ(warning.find("33554432"), std::string::npos) << warning;
  auto table = runTally("gpu " + roots());
  EXPECT_NE(table.out.find("GTT headroom 54.0 GiB (against the compute ceiling"), std::string::npos)
      << table.out;
  EXPECT_NE(table.out.find("warning: " + warning), std::string::npos) << table.out;

  auto d = runTally("doctor --json " + roots());
  auto dd = json::parse(d.out);
  EXPECT_EQ(byKey(dd["gpu_devices"], "key", kAmdBdf)["gtt_ceiling"]["compute"]["source"],
            "KFD TTM limit: ttm.pages_limit = 16777216 pages of 4096 bytes");
  EXPECT_EQ(dd["gtt_warnings"], json::array({warning}));
  auto text = runTally("doctor " + roots());
  EXPECT_NE(text.out.find(fmt::format("gtt ceiling  {} graphics: 128.0 GiB (mem_info_gtt_total "
                                      "(bytes))\n             {} compute (ROCm): 64.0 GiB "
                                      "(KFD TTM limit: ttm.pages_limit = 16777216 pages of 4096 "
                                      "bytes)\n",
                                      kAmdBdf, kAmdBdf)),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("headroom uses the compute ceiling (the smaller)"), std::string::npos);
  EXPECT_NE(text.out.find("warning      " + warning), std::string::npos);
}

TEST_F(Cli, DoctorOnHybridHostIsDegraded) {
  writeFile(host.procRoot() + "/1/comm", "process_api\n");
  writeFile(host.procRoot() + "/self/mountinfo",
            "40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
            "41 30 0:38 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n");
  auto r = runTally("doctor " + roots());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("degraded     no systemd (PID 1 is process_api)\ndegraded     memory "
                       "controller is on cgroup v1\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\nA lease's MemoryMax covers: host memory only\n"), std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace tally
