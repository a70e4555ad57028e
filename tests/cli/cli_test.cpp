// The tally binary end to end on a synthetic tree: --proc-root/--sys-root/
// --cgroup-root give the exact per-process, per-cgroup and per-device figures.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "cgroup/cgroup.h"
#include "cli/cmd_client.h"
#include "lease/meter.h"
#include "rpc/protocol.h"
#include "support/fake_host.h"
#include "support/process.h"
#include "support/scenario.h"

namespace tally {
namespace {

using namespace tally::testing;
using json = nlohmann::json;

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

struct Cli : ::testing::Test {
  FakeHost host;
  void SetUp() override {
    buildScenario(host, readFile(std::string(TALLY_FIXTURE_DIR) + "/fdinfo/xe-kernel-doc.fdinfo"));
  }
  std::string roots() const {
    return "--proc-root " + host.procRoot() + " --sys-root " + host.sysRoot() + " --cgroup-root " +
           host.cgroupRoot();
  }
  static const json& byKey(const json& array, const char* key, const json& value) {
    for (const auto& e : array)
      if (e[key] == value) return e;
    static const json kNull;
    ADD_FAILURE() << "no element with " << key << " = " << value;
    return kNull;
  }
};

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

namespace tally {
namespace {

using namespace tally::testing;

// The shipped example config is valid, and problems come back line-numbered with exit 1.
TEST(ConfigCheckCli, ShippedExampleIsValidAndProblemsAreLineNumbered) {
  auto ok = runProgram({TALLY_BINARY, "config", "check",
                        std::string(TALLY_SOURCE_DIR) + "/dist/tally.toml", "--json"});
  ASSERT_EQ(ok.exitCode(), 0) << ok.err;
  auto doc = nlohmann::json::parse(ok.out);
  EXPECT_TRUE(doc["valid"]);
  EXPECT_EQ(doc["pools"][0]["name"], "gpu");
  EXPECT_EQ(doc["pools"][0]["gpu_memory_budget"], 96ULL << 30);
  EXPECT_EQ(doc["daemon"]["sample_interval_us"], 1000000);
  TempDir dir;
  writeFile(dir.path() + "/bad.toml", "[pools.gpu]\ncapacity = 2\ngpu_memory_budgt = \"96GiB\"\n");
  auto bad = runProgram({TALLY_BINARY, "config", "check", dir.path() + "/bad.toml"});
  EXPECT_EQ(bad.exitCode(), 1);
  EXPECT_NE(bad.err.find(dir.path() + "/bad.toml:3: unknown key 'gpu_memory_budgt' in [pools.gpu]"),
            std::string::npos)
      << bad.err;
  auto missing = runProgram({TALLY_BINARY, "config", "check", dir.path() + "/none.toml"});
  EXPECT_EQ(missing.exitCode(), 1);
  auto daemon = runProgram({TALLY_BINARY, "daemon", "--config", dir.path() + "/bad.toml"});
  EXPECT_EQ(daemon.exitCode(), 1);
  EXPECT_NE(daemon.err.find("tally config check"), std::string::npos) << daemon.err;
}

// A declared lease is listed as the daemon will follow it; its mistakes are
// the attach request's own.
TEST(ConfigCheckCli, DeclaredLeasesAreListedAndTheirMistakesNamed) {
  TempDir dir;
  writeFile(dir.path() + "/t.toml",
            "[pools.gpu]\ncapacity = 2\n\n[leases.llama]\nunit = \"llama-server.service\"\n"
            "pools = [\"gpu\"]\nmemory_max = \"8GiB\"\ngpu_memory_max = \"64GiB\"\n");
  auto ok = runProgram({TALLY_BINARY, "config", "check", dir.path() + "/t.toml"});
  ASSERT_EQ(ok.exitCode(), 0) << ok.err;
  EXPECT_NE(ok.out.find("[leases.llama]  (leased at every run of its unit)\n"
                        "  unit                      llama-server.service\n"
                        "  pools                     gpu\n"
                        "  memory_max                8.0 GiB\n"
                        "  gpu_memory_max            64.0 GiB\n"),
            std::string::npos)
      << ok.out;
  auto asJson = runProgram({TALLY_BINARY, "config", "check", dir.path() + "/t.toml", "--json"});
  auto doc = nlohmann::json::parse(asJson.out);
  EXPECT_EQ(doc["leases"][0]["unit"], "llama-server.service");
  EXPECT_EQ(doc["leases"][0]["gpu_memory_max"], 64ULL << 30);
  writeFile(dir.path() + "/bad.toml",
            "[pools.gpu]\ncapacity = 2\n\n[leases.llama]\nunit = \"llama-server.service\"\n"
            "pools = [\"gpu\"]\ngpu_memory_action = \"explode\"\n");
  auto bad = runProgram({TALLY_BINARY, "config", "check", dir.path() + "/bad.toml"});
  EXPECT_EQ(bad.exitCode(), 1);
  EXPECT_NE(bad.err.find(dir.path() + "/bad.toml:4: leases.llama: "), std::string::npos) << bad.err;
}

// config check catches what the daemon would refuse on this host (a textfile
// directory that does not exist), warns about what cannot mean what it says
// here (a device not on this host, budgets above what the host or its devices
// hold), and prints every effective setting.
TEST_F(Cli, ConfigCheckJudgesTheConfigAgainstThisHost) {
  TempDir dir;
  std::string file = dir.path() + "/tally.toml";
  writeFile(file,
            fmt::format("[daemon]\nmetrics_textfile = \"{}/missing/tally.prom\"\n"
                        "[pools.gpu]\ncapacity = 2\nmemory_budget = \"200GiB\"\n"
                        "gpu_memory_budget = \"900GiB\"\ndevices = [\"{}\", \"0000:99:00.0\"]\n",
                        dir.path(), kAmdBdf));
  auto check = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv{TALLY_BINARY,    "config",         "check",      file,
                                  "--proc-root",   host.procRoot(),  "--sys-root", host.sysRoot(),
                                  "--cgroup-root", host.cgroupRoot()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return runProgram(argv);
  };
  auto bad = check({});
  EXPECT_EQ(bad.exitCode(), 1) << bad.err;
  EXPECT_NE(bad.err.find("daemon.metrics_textfile: the directory " + dir.path() +
                         "/missing does not exist"),
            std::string::npos)
      << bad.err;
  ::mkdir((dir.path() + "/missing").c_str(), 0755);
  auto ok = check({});
  EXPECT_EQ(ok.exitCode(), 0) << ok.err;
  EXPECT_NE(ok.err.find("warning: pools.gpu.devices: 0000:99:00.0 is not a DRM device on this "
                        "host (here: 0000:03:00.0, " +
                        std::string(kAmdBdf) + ")"),
            std::string::npos)
      << ok.err;
  EXPECT_NE(ok.err.find("warning: pools.gpu.memory_budget 200.0 GiB is more than this host's "
                        "memory (MemTotal 125.0 GiB)"),
            std::string::npos)
      << ok.err;
  EXPECT_NE(ok.err.find("warning: pools.gpu.gpu_memory_budget 900.0 GiB is more than the pool's "
                        "devices hold"),
            std::string::npos)
      << ok.err;
  for (const char* key : {"socket", "state_dir", "queue_timeout", "metrics_textfile",
                          "max_connections", "request_timeout", "gtt_ceiling"})
    EXPECT_NE(ok.out.find(key), std::string::npos) << key << "\n" << ok.out;
  auto j = check({"--json"});
  auto doc = json::parse(j.out);
  EXPECT_EQ(doc["valid"], true);
  EXPECT_EQ(doc["warnings"].size(), 3u) << doc.dump(2);
  EXPECT_EQ(doc["daemon"]["queue_timeout_us"], 3'600'000'000u);
  EXPECT_EQ(doc["daemon"]["metrics_textfile"], dir.path() + "/missing/tally.prom");
}

// An ended lease is shown from the ledger when no daemon answers (a
// standalone run's is only there): name, kind, outcome, limits and peaks.
TEST(LeaseShowCli, AnEndedLeaseIsReadFromTheLedgerWithoutADaemon) {
  TempDir dir;
  std::string state = dir.path() + "/state";
  auto run = runProgram({TALLY_BINARY, "run", "--json", "--state-dir", state, "--name", "probe",
                         "--memory-max", "64M", "--cgroupfs", "--cgroup-parent", "/tally-no-such",
                         "--", "true"});
  ASSERT_EQ(run.exitCode(), 125) << run.err;
  std::string id = nlohmann::json::parse(run.out)["lease"]["id"];
  auto r = runProgram({TALLY_BINARY, "lease", "show", id, "--state-dir", state, "--socket",
                       dir.path() + "/no-daemon.sock"});
  ASSERT_EQ(r.exitCode(), 0) << r.err;
  EXPECT_NE(r.err.find("read from the ledger at " + state + "/ledger.sqlite"), std::string::npos)
      << r.err;
  EXPECT_NE(r.out.find("lease " + id + " (probe, run): ended"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  outcome containment-refused: the workload never ran"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("MemoryMax=64.0 MiB"), std::string::npos) << r.out;
  auto missing = runProgram({TALLY_BINARY, "lease", "show", "000000000000", "--state-dir", state,
                             "--socket", dir.path() + "/no-daemon.sock"});
  EXPECT_EQ(missing.exitCode(), 3);
  EXPECT_NE(missing.err.find("no lease 000000000000 in the ledger"), std::string::npos)
      << missing.err;
}

// A live lease as the daemon describes it: pools, declared limits, attributes, age.
TEST(LeaseShowCli, ALiveLeaseShowsItsPoolsLimitsAndAttributes) {
  auto lines = cli::leaseShowLines(nlohmann::json::parse(R"({
    "lease": "1f0c2a9b3e7d", "name": "llama", "kind": "attach", "state": "running",
    "pools": ["gpu"], "declared": {"memory_max": 51539607552, "gpu_memory_max": 42949672960},
    "attributes": {"model": "qwen3-32b"}, "started_at_ns": 1,
    "cgroup": "/system.slice/llama.service", "unit": "llama.service",
    "memory": {"current_bytes": 1073741824, "peak_sampled_bytes": 2147483648},
    "gpu": {"current_bytes": 4294967296, "peak_bytes": 4294967296}})"));
  ASSERT_GE(lines.size(), 6u);
  EXPECT_EQ(lines[0], "lease 1f0c2a9b3e7d (llama, attach): running");
  EXPECT_EQ(lines[1].rfind("  pools gpu; MemoryMax=48.0 GiB, gpu_memory_max=40.0 GiB; age ", 0), 0u)
      << lines[1];
  EXPECT_EQ(lines[2], "  attributes model=qwen3-32b");
  EXPECT_EQ(lines[3], "  cgroup /system.slice/llama.service (unit llama.service)");
  EXPECT_EQ(lines[4], "  memory now 1.0 GiB, sampled peak 2.0 GiB (cgroup)");
  EXPECT_EQ(lines[5], "  GPU memory now 4.0 GiB, peak 4.0 GiB (drm-fdinfo)");
  // Where the kernel charges it: the charge is the figure, fdinfo and refusals beside it.
  auto charged = cli::leaseShowLines(nlohmann::json::parse(R"({
    "lease": "1f0c2a9b3e7d", "name": "llama", "kind": "run", "state": "running",
    "gpu": {"current_bytes": 4294967296, "peak_bytes": 6442450944, "source": "kernel-charge",
            "fdinfo_bytes": 1073741824, "allocations_refused": 3, "refused_bytes": 2147483648}})"));
  ASSERT_EQ(charged.size(), 2u);
  EXPECT_EQ(charged[1],
            "  GPU memory now 4.0 GiB, peak 6.0 GiB (kernel-charge); fdinfo 1.0 GiB; "
            "3 allocations refused (2.0 GiB)");
}

// Read-only commands never create state: a missing ledger (or state dir) is
// exit 3 with its path, and neither is created. Once a lease has been
// recorded, the same commands read it.
TEST(LedgerCli, ReadersNeverCreateALedger) {
  TempDir dir;
  std::string state = dir.path() + "/state";
  auto exists = [](const std::string& path) { return ::access(path.c_str(), F_OK) == 0; };
  for (std::vector<std::string> args : {std::vector<std::string>{"ledger"},
                                        {"ledger", "--json"},
                                        {"ledger", "verify"},
                                        {"ledger", "verify", "--json"},
                                        {"ledger", "export"}}) {
    args.insert(args.begin(), TALLY_BINARY);
    args.insert(args.end(), {"--state-dir", state});
    auto r = runProgram(args);
    EXPECT_EQ(r.exitCode(), 3) << args[2] << "\n" << r.err;
    EXPECT_NE(r.err.find("no ledger at " + state + "/ledger.sqlite"), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find("intact"), std::string::npos) << r.out;
    EXPECT_FALSE(exists(state)) << "tally " << args[1] << " created the state directory";
  }
  ::mkdir(state.c_str(), 0700);  // a directory without a ledger: still nothing to read
  auto empty = runProgram({TALLY_BINARY, "ledger", "verify", "--state-dir", state});
  EXPECT_EQ(empty.exitCode(), 3) << empty.err;
  EXPECT_FALSE(exists(state + "/ledger.sqlite"));

  // A refused run records its outcome (and so creates the ledger).
  auto run = runProgram({TALLY_BINARY, "run", "--state-dir", state, "--cgroupfs", "--cgroup-parent",
                         "/tally-no-such-parent", "--", "true"});
  EXPECT_EQ(run.exitCode(), 125) << run.err;
  auto v = runProgram({TALLY_BINARY, "ledger", "verify", "--state-dir", state, "--json"});
  ASSERT_EQ(v.exitCode(), 0) << v.err;
  auto doc = nlohmann::json::parse(v.out);
  EXPECT_TRUE(doc["intact"]);
  EXPECT_EQ(doc["rows"], 1);
  auto e = runProgram({TALLY_BINARY, "ledger", "export", "--json", "--state-dir", state});
  ASSERT_EQ(e.exitCode(), 0);
  EXPECT_EQ(nlohmann::json::parse(e.out).size(), 1u);
}

// An operator's decision on a lost tail: shown without --yes (nothing
// written, exit 1), recorded with it; verify then marks it acknowledged.
TEST(LedgerCli, AcknowledgeShowsTheDamageAndWritesOnlyWithYes) {
  TempDir dir;
  std::string state = dir.path() + "/state";
  auto refusedRun = [&] {
    return runProgram({TALLY_BINARY, "run", "--state-dir", state, "--cgroupfs", "--cgroup-parent",
                       "/tally-no-such-parent", "--", "true"});
  };
  ASSERT_EQ(refusedRun().exitCode(), 125);
  std::filesystem::copy_file(state + "/ledger.sqlite", dir.path() + "/older.sqlite");
  ASSERT_EQ(refusedRun().exitCode(), 125);
  ASSERT_EQ(refusedRun().exitCode(), 125);
  // A crash that lost the WAL: the database as it was after row 1.
  std::filesystem::copy_file(dir.path() + "/older.sqlite", state + "/ledger.sqlite",
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::remove(state + "/ledger.sqlite-wal");
  std::filesystem::remove(state + "/ledger.sqlite-shm");

  auto v = runProgram({TALLY_BINARY, "ledger", "verify", "--state-dir", state});
  EXPECT_EQ(v.exitCode(), 1) << v.out << v.err;
  EXPECT_NE(v.out.find("rows 2..3 at the end are missing: the chain ends at row 1"),
            std::string::npos)
      << v.out;
  auto shown = runProgram({TALLY_BINARY, "ledger", "acknowledge", "--state-dir", state});
  EXPECT_EQ(shown.exitCode(), 1) << shown.out << shown.err;
  EXPECT_NE(shown.out.find("1 problem no operator accepted:"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("Nothing written."), std::string::npos) << shown.out;
  auto yes = runProgram({TALLY_BINARY, "ledger", "acknowledge", "--yes", "--state-dir", state});
  EXPECT_EQ(yes.exitCode(), 0) << yes.out << yes.err;
  EXPECT_NE(yes.out.find("acknowledged as row #2 (damage-acknowledged)"), std::string::npos)
      << yes.out;
  auto again = runProgram({TALLY_BINARY, "ledger", "verify", "--state-dir", state, "--json"});
  auto doc = nlohmann::json::parse(again.out);
  EXPECT_EQ(doc["acknowledged"].size(), 1u) << again.out;
  EXPECT_EQ(doc["witness_seq"], 2) << again.out;
  EXPECT_TRUE(doc["problems"].empty()) << again.out;  // the witness names the acknowledgement
  auto nothing = runProgram({TALLY_BINARY, "ledger", "acknowledge", "--state-dir", state});
  EXPECT_EQ(nothing.exitCode(), 0);
  EXPECT_NE(nothing.out.find("nothing to acknowledge: the chain is intact"), std::string::npos)
      << nothing.out;
}

// A daemon that accepts connections and never answers (hung, or stopped with
// SIGSTOP): every client command gives up after --timeout with the socket's
// path, exit 3, instead of hanging the operator's shell.
TEST(ClientCli, EveryCommandGivesUpOnASilentDaemon) {
  TempDir dir;
  std::string path = dir.path() + "/silent.sock";
  int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 64), 0);  // connections complete in the backlog; none is read
  for (std::vector<std::string> args : {std::vector<std::string>{"leases"},
                                        {"pools"},
                                        {"seats"},
                                        {"metrics"},
                                        {"lease", "show", "abc"},
                                        {"lease", "release", "abc"},
                                        {"attach", "--pool", "gpu", "--pid", "1"}}) {
    args.insert(args.begin(), TALLY_BINARY);
    args.insert(args.end(), {"--socket", path, "--timeout", "300ms"});
    // The client gave up on its own --timeout (it says so), never on the
    // daemon, which never answers: no wall clock needed to know that.
    auto r = runProgram(args);
    EXPECT_EQ(r.exitCode(), 3) << args[1] << "\n" << r.err;
    EXPECT_NE(r.err.find("the daemon at " + path + " did not answer in 300 ms"), std::string::npos)
        << r.err;
  }
  auto bad = runProgram({TALLY_BINARY, "leases", "--socket", path, "--timeout", "0"});
  EXPECT_EQ(bad.exitCode(), 2) << bad.err;
  EXPECT_NE(bad.err.find("--timeout must be between 1ms and 1h"), std::string::npos) << bad.err;
  auto help = runProgram({TALLY_BINARY, "pools", "--help"});
  EXPECT_NE(help.out.find("--timeout"), std::string::npos);
  EXPECT_NE(help.out.find("10s"), std::string::npos) << help.out;
  ::close(listener);
}

// A daemon that answers every request with one error, as the real one words
// it: each command prints the daemon's sentence (never the RPC code alone) and
// exits as tally --help's table says.
class OneAnswerDaemon {
 public:
  OneAnswerDaemon(std::string path, rpc::RpcError answer) : path_(std::move(path)) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path_.c_str());
    ok_ = fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
          ::listen(fd_, 8) == 0;
    thread_ = std::thread([this, answer] {
      // One client at a time; shutdown(2) of the listener ends accept().
      for (int c; (c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC)) >= 0; ::close(c)) {
        std::string line;
        char ch;
        while (::read(c, &ch, 1) == 1 && ch != '\n') line += ch;
        auto req = nlohmann::json::parse(line, nullptr, false);
        std::string reply = rpc::encodeError(req.is_object() ? req["id"] : json(), answer);
        (void)!::write(c, reply.data(), reply.size());
      }
    });
  }
  ~OneAnswerDaemon() {
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  bool ok() const { return ok_; }

 private:
  std::string path_;
  int fd_ = -1;
  bool ok_ = false;
  std::thread thread_;
};

TEST(ExitStatusCli, TheDaemonsNoIsASentenceAndOneExitCodeAcrossCommands) {
  struct Case {
    rpc::RpcError answer;
    int exit;
    const char* adds;  // what tally says beyond the daemon's sentence
  };
  const std::string kill =
      "unit llama.service uses GPU memory 64.0 MiB now (DRM fdinfo), over --gpu-memory-max 48.0 "
      "MiB: attaching would kill it on arrival. Declare limits above what it uses, or pass "
      "--force to attach anyway (it is then killed if it stays over)";
  for (const Case& c : {
           Case{{"invalid-params", kill}, 5, ""},
           Case{{"refused", "no pool 'gpux' (configured: gpu)"}, 5, ""},
           Case{{"conflict", "cgroup /a is already leased by 0123456789ab (llama)"}, 5, ""},
           Case{{"not-found", "no lease abc"}, 5, ""},
           Case{{"unavailable", "the ledger cannot write: disk full"}, 5, ""},
           Case{{"unsupported-version", "protocol version 9 is not spoken here"},
                3,
                ". The daemon could not read this client's request (unsupported-version): run "
                "the same tally version on both sides (tally --version here; systemctl status "
                "tally names the daemon's binary)"},
           Case{{"internal", "std::bad_alloc"},
                4,
                ". That is a bug in the daemon: please report it with its journal"},
       }) {
    TempDir dir;
    OneAnswerDaemon daemon(dir.path() + "/d.sock", c.answer);
    ASSERT_TRUE(daemon.ok());
    for (std::vector<std::string> args :
         {std::vector<std::string>{"attach", "--pool", "gpu", "--pid", "1"},
          {"leases"},
          {"lease", "release", "abc"}}) {
      std::string cmd = args[0] == "lease" ? "lease release" : args[0];
      args.insert(args.begin(), TALLY_BINARY);
      args.insert(args.end(), {"--socket", dir.path() + "/d.sock"});
      auto r = runProgram(args);
      EXPECT_EQ(r.exitCode(), c.exit) << c.answer.code << " " << cmd << "\n" << r.err;
      EXPECT_NE(r.err.find("tally " + cmd + ": " + c.answer.message + c.adds + "\n"),
                std::string::npos)
          << c.answer.code << " " << cmd << "\n"
          << r.err;
      // The code alone is never the message (a protocol disagreement names it as a clue).
      if (std::string(c.adds).empty()) {
        EXPECT_EQ(r.err.find("(" + c.answer.code + ")"), std::string::npos) << r.err;
      }
    }
  }
}

// One table of exit codes: tally --help prints it and the man page carries
// the same codes with the same words.
TEST(ExitStatusCli, HelpAndTheManPageCarryTheSameTable) {
  auto help = runProgram({TALLY_BINARY, "--help"});
  std::map<int, std::string> fromHelp, fromMan;
  std::regex helpLine("^  ([0-9])  (.+)$"), continued("^     (\\S.*)$");
  std::istringstream lines(help.out.substr(help.out.find("Exit status:")));
  int code = -1;
  for (std::string l; std::getline(lines, l);) {
    std::smatch m;
    EXPECT_LE(l.size(), 80u) << l;
    if (std::regex_match(l, m, helpLine))
      fromHelp[code = std::stoi(m[1])] = m[2];
    else if (code >= 0 && std::regex_match(l, m, continued))
      fromHelp[code] += " " + m[1].str();
  }
  std::string man = readFile(std::string(TALLY_SOURCE_DIR) + "/dist/tally.1.in");
  std::string section = man.substr(man.find(".SH EXIT STATUS"));
  section = section.substr(0, section.find(".SH ", 4));
  std::regex manEntry("\\.TP\n\\.B ([0-9])\n([^\n]+)\n");
  for (auto it = std::sregex_iterator(section.begin(), section.end(), manEntry);
       it != std::sregex_iterator(); ++it)
    fromMan[std::stoi((*it)[1])] = (*it)[2];
  EXPECT_EQ(fromHelp.size(), 6u) << help.out;
  EXPECT_EQ(fromHelp, fromMan);
  EXPECT_NE(help.out.find("'tally run' exits with its workload's status"), std::string::npos);
}

// A mistyped command is named with the nearest one, before any parsing or
// lookup; help shows "tally", not the binary's path; --version names the commit.
TEST(MessagesCli, UnknownCommandsHelpAndVersionReadLikeATool) {
  auto typo = runProgram({TALLY_BINARY, "gpuu"});
  EXPECT_EQ(typo.exitCode(), 2);
  EXPECT_EQ(typo.err, "tally: unknown command 'gpuu' (did you mean gpu?)\n");
  auto rooted = runProgram({TALLY_BINARY, "--proc-root", "/proc", "dcotor", "--json"});
  EXPECT_EQ(rooted.err, "tally: unknown command 'dcotor' (did you mean doctor?)\n");
  auto nothing = runProgram({TALLY_BINARY, "xyzzy"});
  EXPECT_EQ(nothing.err, "tally: unknown command 'xyzzy' (tally --help lists them)\n");
  // The workload's own words are never taken for a command.
  auto workload = runProgram({TALLY_BINARY, "run", "--memory-max", "lots", "--", "gpuu"});
  EXPECT_EQ(workload.err.find("unknown command"), std::string::npos) << workload.err;
  auto help = runProgram({TALLY_BINARY, "gpu", "--help"});
  EXPECT_EQ(help.exitCode(), 0);
  EXPECT_NE(help.out.find("Usage: tally gpu"), std::string::npos) << help.out;
  EXPECT_EQ(help.out.find(TALLY_BINARY), std::string::npos) << help.out;
  auto version = runProgram({TALLY_BINARY, "--version"});
  EXPECT_EQ(version.exitCode(), 0);
  EXPECT_EQ(version.out.rfind("tally 0.1.0 (", 0), 0u) << version.out;
  EXPECT_TRUE(version.out.find("(commit ") != std::string::npos ||
              version.out.find("(unknown commit)") != std::string::npos)
      << version.out;
}

}  // namespace
}  // namespace tally

namespace tally {
namespace {

using namespace tally::testing;

// A --pool job in the foreground says at start that it ends with its
// terminal, and how not to; --detach without a pool is a usage error.
TEST(DetachCli, AForegroundPoolJobSaysALostTerminalEndsItAndHowToDetach) {
  TempDir dir;
  auto fg = runProgram(
      {TALLY_BINARY, "run", "--pool", "batch", "--socket", dir.path() + "/no.sock", "--", "true"});
  EXPECT_EQ(fg.exitCode(), 125) << fg.err;  // no daemon: nothing ran
  EXPECT_EQ(fg.err.rfind("tally run: this job ends if this terminal goes (SIGHUP); to let it run "
                         "on without one, add --detach (its output goes to the journal: tally "
                         "logs ID)\n",
                         0),
            0u)
      << fg.err;
  auto quiet = runProgram({TALLY_BINARY, "run", "--quiet", "--pool", "batch", "--socket",
                           dir.path() + "/no.sock", "--", "true"});
  EXPECT_EQ(quiet.err.find("this terminal goes"), std::string::npos) << quiet.err;
  auto alone = runProgram({TALLY_BINARY, "run", "--detach", "--", "true"});
  EXPECT_EQ(alone.exitCode(), 2);
  EXPECT_EQ(alone.err,
            "tally run: --detach needs --pool: a detached job's lease is held through the daemon "
            "(tally run --pool P --detach -- CMD)\n");
  // No daemon: refused, nothing left running. Without systemd (this build
  // host) it is the manager that is missing; with one, the job's own tally
  // run finds no daemon and its service fails before READY.
  auto noDaemon = runProgram({TALLY_BINARY, "run", "--system", "--detach", "--pool", "batch",
                              "--socket", dir.path() + "/no.sock", "--", "true"});
  EXPECT_EQ(noDaemon.exitCode(), 125);
  EXPECT_TRUE(noDaemon.err.find("tally run: --detach needs a systemd manager: ") !=
                  std::string::npos ||
              noDaemon.err.find("tally run: the detached job did not start: ") != std::string::npos)
      << noDaemon.err;
}

TEST(DetachCli, LogsWithoutADaemonSaysSo) {
  TempDir dir;
  auto r = runProgram({TALLY_BINARY, "logs", "1f0c2a9b3e7d", "--socket", dir.path() + "/no.sock"});
  EXPECT_EQ(r.exitCode(), 3) << r.err;
}

}  // namespace
}  // namespace tally
