// The scanner and the aggregation on a synthetic proc/sys tree: exact
// per-client, per-process, per-cgroup and per-device figures.
// A meter's held processes across samples (ProcHandles): scan_proc_handles_test.cpp.
#include "scanner/scan.h"

#include <grp.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "gpumem/aggregate.h"
#include "host/snapshot.h"
#include "report/gpu_json.h"
#include "report/gpu_table.h"
#include "support/scenario.h"

namespace tally::scanner {
namespace {

using namespace tally::testing;

std::string xeFdinfo() {
  return readFile(std::string(TALLY_FIXTURE_DIR) + "/fdinfo/xe-kernel-doc.fdinfo");
}

struct ScannerTest : ::testing::Test {
  FakeHost host;
  std::optional<fs::Root> proc, sys, cgroup;
  void SetUp() override {
    buildScenario(host, xeFdinfo());
    proc.emplace(std::move(*fs::Root::open(host.procRoot())));
    sys.emplace(std::move(*fs::Root::open(host.sysRoot())));
    cgroup.emplace(std::move(*fs::Root::open(host.cgroupRoot())));
  }
  static const Process* process(const Scan& s, pid_t pid) {
    for (const auto& p : s.processes)
      if (p.pid == pid) return &p;
    return nullptr;
  }
  static const Client* client(const Scan& s, const std::string& pdev, std::uint64_t id) {
    for (const auto& c : s.clients)
      if (c.info.pdev == pdev && c.info.clientId == id) return &c;
    return nullptr;
  }
  static std::optional<std::uint64_t> resident(const gpumem::RegionMap& m,
                                               const std::string& region) {
    auto it = m.find(region);
    if (it == m.end()) return std::nullopt;
    return it->second.resident.get();
  }
};

TEST_F(ScannerTest, HostScanFindsExactlyTheGpuProcesses) {
  Scanner scanner(*proc, *sys);
  auto scan = scanner.scanHost();
  ASSERT_TRUE(scan) << scan.error().message;
  std::vector<pid_t> pids;
  for (const auto& p : scan->processes) pids.push_back(p.pid);
  // 500 (no DRM), 600 (vanished), 700 (fdinfo gone) are absent; 800 holds /dev/kfd.
  EXPECT_EQ(pids, (std::vector<pid_t>{100, 101, 200, 300, 301, 400, 800}));
  EXPECT_TRUE(scan->unreadable.empty());   // vanished is not unreadable
  EXPECT_EQ(scanner.stats().drmFds, 11u);  // 700's fd is DRM, its fdinfo vanished
  ASSERT_EQ(scan->devices.devices.size(), 2u);
  EXPECT_EQ(scan->devices.devices[0].key, kXeBdf);
  EXPECT_EQ(scan->devices.devices[1].key, kAmdBdf);
  EXPECT_EQ(scan->devices.devices[1].driver, "amdgpu");
  ASSERT_EQ(scan->devices.devices[1].nodes.size(), 2u);
  EXPECT_EQ(scan->devices.devices[1].nodes[0].name, "card1");
  EXPECT_EQ(scan->devices.devices[1].nodes[1].name, "renderD128");
}

// The table names each process's owner, says why the clients can count more
// than the kernel's GPUActive (never a bare negative), and marks a total
// with processes not read as a lower bound.
TEST_F(ScannerTest, TheTableNamesOwnersAndSaysWhatItsTotalsAre) {
  Scanner scanner(*proc, *sys);
  auto scan = scanner.scanHost();
  ASSERT_TRUE(scan);
  auto snapshot = host::readSnapshot(*proc, *sys);
  snapshot.meminfo.gpuActive = 4096;  // fewer than the clients hold
  auto agg = gpumem::aggregate(*scan, snapshot);
  std::vector<std::uint32_t> asked;
  auto name = [&](std::uint32_t uid) {
    asked.push_back(uid);
    return uid == 0 ? std::string("root") : std::to_string(uid);
  };
  std::string table = report::gpuTable(*scan, agg, snapshot, report::GroupBy::kProcess, name);
  EXPECT_NE(table.find("     PID USER       COMM"), std::string::npos) << table;
  EXPECT_NE(table.find("     100 1000       *llama-server"), std::string::npos) << table;
  EXPECT_NE(table.find("     200 root       python"), std::string::npos) << table;
  EXPECT_EQ(asked.size(), scan->processes.size());
  EXPECT_NE(table.find("more than the kernel counts (a buffer shared between clients is counted "
                       "in each of them, once by the kernel)"),
            std::string::npos)
      << table;
  EXPECT_EQ(table.find("; -"), std::string::npos) << table;
  EXPECT_EQ(table.find("TOTAL>="), std::string::npos) << table;
  scan->unreadable.push_back({4242, "permission denied"});
  table = report::gpuTable(*scan, agg, snapshot, report::GroupBy::kProcess, name);
  EXPECT_NE(table.find("TOTAL>= " + std::string(kAmdBdf)), std::string::npos) << table;
  EXPECT_NE(table.find("TOTAL>= : a lower bound: 1 process not read (below) may hold more."),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("unreadable: pid 4242: permission denied"), std::string::npos) << table;
}

TEST_F(ScannerTest, ClientsDeduplicatedAcrossFdsAndProcesses) {
  Scanner scanner(*proc, *sys);
  auto scan = scanner.scanHost();
  ASSERT_TRUE(scan);
  EXPECT_EQ(scan->clients.size(), 7u);  // amd 10, 11, 20, 30, two 5.14 fds; xe 3
  const Client* c10 = client(*scan, kAmdBdf, 10);
  ASSERT_NE(c10, nullptr);
  ASSERT_EQ(c10->holders.size(), 3u);
  EXPECT_EQ(c10->holders[0].pid, 100);
  EXPECT_EQ(c10->holders[0].fd, 3);
  EXPECT_EQ(c10->holders[1].fd, 4);
  EXPECT_EQ(c10->holders[2].pid, 101);
  EXPECT_EQ(c10->owner, 100);  // the older holder
  EXPECT_TRUE(c10->sharedAcrossProcesses);
  EXPECT_TRUE(c10->sharedAcrossCgroups);  // llama.service vs llama.service/worker
  const Client* c30 = client(*scan, kAmdBdf, 30);
  ASSERT_NE(c30, nullptr);
  EXPECT_EQ(c30->owner, 301);  // started at tick 10, before the compositor (40)
  EXPECT_TRUE(c30->sharedAcrossCgroups);
  const Client* c11 = client(*scan, kAmdBdf, 11);
  ASSERT_NE(c11, nullptr);
  EXPECT_EQ(c11->minor, 1u);  // card1: same device as renderD128
  EXPECT_EQ(c11->device, scan->devices.byNode(devices::kDrmMajor, 128));
  EXPECT_FALSE(c11->sharedAcrossProcesses);
  const Client* xe = client(*scan, kXeBdf, 3);
  ASSERT_NE(xe, nullptr);
  EXPECT_EQ(xe->device, scan->devices.byNode(devices::kDrmMajor, 129));
  int undeduplicated = 0;
  for (const auto& c : scan->clients) undeduplicated += c.undeduplicated;
  EXPECT_EQ(undeduplicated, 2);  // 5.14 format: no client id, once per fd
}

TEST_F(ScannerTest, PerProcessCgroupAndNamespaceFacts) {
  Scanner scanner(*proc, *sys);
  auto scan = scanner.scanHost();
  ASSERT_TRUE(scan);
  const Process* py = process(*scan, 200);
  ASSERT_NE(py, nullptr);
  EXPECT_EQ(py->nspid, (std::vector<std::uint64_t>{200, 1}));
  EXPECT_EQ(py->comm, "python");
  EXPECT_EQ(py->cgroup, kPodCgroup);
  EXPECT_EQ(py->startTimeTicks, 70u);
  const Process* rocm = process(*scan, 800);
  ASSERT_NE(rocm, nullptr);
  EXPECT_TRUE(rocm->holdsKfd);
  ASSERT_EQ(rocm->kfdVram.size(), 1u);
  EXPECT_EQ(rocm->kfdVram[0].gpuId, 1234u);
  EXPECT_EQ(rocm->kfdVram[0].bytes, kGiB);
  EXPECT_EQ(rocm->kfdVram[0].pdev, kAmdBdf);
  EXPECT_TRUE(rocm->clients.empty());
}

// Newer kernels give a process's secondary KFD contexts their own
// directory; each context's VRAM is the process's too.
TEST_F(ScannerTest, KfdSecondaryContextsAreRead) {
  writeFile(host.sysRoot() + "/class/kfd/kfd/proc/800/context_3/vram_1234", "268435456\n");
  writeFile(host.sysRoot() + "/class/kfd/kfd/proc/800/context_3/pasid", "32781\n");
  writeFile(host.sysRoot() + "/class/kfd/kfd/proc/800/context_x/vram_1234", "1\n");  // not an id
  // A counter taken below zero, printed unsigned: -4096, wrapped. Never a floor of exabytes.
  writeFile(host.sysRoot() + "/class/kfd/kfd/proc/800/context_4/vram_1234",
            "18446744073709547520\n");
  Scanner scanner(*proc, *sys);
  auto scan = scanner.scanHost();
  ASSERT_TRUE(scan);
  const Process* rocm = process(*scan, 800);
  ASSERT_NE(rocm, nullptr);
  ASSERT_EQ(rocm->kfdVram.size(), 2u);
  EXPECT_FALSE(rocm->kfdVram[0].context);
  EXPECT_EQ(rocm->kfdVram[1].context, 3u);
  EXPECT_EQ(rocm->kfdVram[1].bytes, 256 * kMiB);
  EXPECT_EQ(rocm->kfdVram[1].pdev, kAmdBdf);
  auto kfd = gpumem::kfdFigure(*rocm, scan->devices, probes::parseKernelRelease("6.12.0"));
  ASSERT_TRUE(kfd);
  EXPECT_EQ(kfd->bytes, kGiB + 256 * kMiB);
}

// The Strix Halo NPU (amdxdna) is on /dev/accel, major 261: found in
// class/accel, scanned like a render node, its regions classed by its driver.
TEST_F(ScannerTest, AccelNodesAreScannedLikeRenderNodes) {
  host.addDevice({"0000:c5:00.1", "amdxdna", {}, {}, true, {0}});
  FakeProcess npu{950, "npu-app", "/system.slice/npu.service", "", 95, {}, 0, {}, false};
  FakeFd fd;
  fd.fd = 5;
  fd.other = "char:261:0";
  fd.fdinfo = readFile(std::string(TALLY_FIXTURE_DIR) + "/fdinfo/amdxdna-xdna-driver324.fdinfo");
  npu.fds = {fd};
  host.addProcess(npu);
  Scanner scanner(*proc, *sys);
  auto scan = scanner.scanHost();
  ASSERT_TRUE(scan);
  const Process* p = process(*scan, 950);
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(p->clients.size(), 1u);
  const Client& c = scan->clients[p->clients[0]];
  EXPECT_EQ(c.major, devices::kAccelMajor);
  EXPECT_EQ(c.minor, 0u);
  EXPECT_EQ(c.info.driver, "amdxdna_accel_driver");
  EXPECT_EQ(c.info.clientId, 76u);
  ASSERT_TRUE(c.device);
  const auto& dev = scan->devices.devices[*c.device];
  EXPECT_EQ(dev.key, "0000:c5:00.1");
  EXPECT_EQ(dev.driver, "amdxdna");
  ASSERT_EQ(dev.nodes.size(), 1u);
  EXPECT_EQ(dev.nodes[0].name, "accel0");
  EXPECT_FALSE(dev.nodes[0].isRender());
  auto regions = gpumem::clientRegions(*scan, c);
  EXPECT_EQ(regions.regions["memory"].cls, devices::MemoryClass::HostCharged);
  // DRM minor 0 (card0 of no device here) is not accel minor 0.
  EXPECT_FALSE(scan->devices.byNode(devices::kDrmMajor, 0));
}

TEST_F(ScannerTest, AggregateExactFigures) {
  Scanner scanner(*proc, *sys);
  auto scan = scanner.scanHost();
  ASSERT_TRUE(scan);
  host::Snapshot facts;
  facts.meminfo.memAvailable = kMemAvailable;
  auto agg = gpumem::aggregate(*scan, facts);

  auto procRegions = [&](pid_t pid) -> const gpumem::RegionMap& {
    for (std::size_t i = 0; i < scan->processes.size(); ++i)
      if (scan->processes[i].pid == pid) return agg.processRegions[i];
    throw std::runtime_error("no pid");
  };
  EXPECT_EQ(resident(procRegions(100), "gtt"), 4 * kGiB + 1 * kMiB);
  EXPECT_EQ(resident(procRegions(100), "vram"), 512 * kMiB);
  EXPECT_TRUE(procRegions(101).empty());  // holds client 10 but does not own it
  EXPECT_EQ(resident(procRegions(200), "gtt"), 2 * kGiB + 192 * kKiB);  // amd + xe gtt
  EXPECT_EQ(resident(procRegions(200), "vram0"), 23992 * kKiB);
  EXPECT_TRUE(procRegions(300).empty());
  EXPECT_EQ(resident(procRegions(301), "gtt"), 8 * kMiB);
  EXPECT_EQ(resident(procRegions(400), "gtt"), 4 * kMiB);  // two undeduplicated fds
  EXPECT_EQ(resident(procRegions(400), "vram"), 2 * kMiB);

  ASSERT_EQ(agg.cgroups.size(), 7u);
  auto group = [&](const std::string& path) -> const gpumem::CgroupGroup& {
    for (const auto& g : agg.cgroups)
      if (g.path == path) return g;
    throw std::runtime_error("no cgroup " + path);
  };
  EXPECT_EQ(resident(group("/system.slice/llama.service").regions, "gtt"), 4 * kGiB + 1 * kMiB);
  EXPECT_EQ(group("/system.slice/llama.service").ownedClients.size(), 2u);
  EXPECT_TRUE(group("/system.slice/llama.service/worker").regions.empty());
  EXPECT_EQ(resident(group(kPodCgroup).regions, "gtt"), 2 * kGiB + 192 * kKiB);
  ASSERT_TRUE(group(kPodCgroup).workload);
  EXPECT_EQ(group(kPodCgroup).workload->kind, attribution::WorkloadKind::kPodman);
  EXPECT_EQ(resident(group("/system.slice/systemd-logind.service").regions, "gtt"), 8 * kMiB);
  EXPECT_EQ(group("/system.slice/rocm.service").kfd->bytes, kGiB);

  // Device: every client once, whoever owns it.
  const gpumem::DeviceSummary* amd = nullptr;
  for (const auto& d : agg.devices)
    if (d.device->key == kAmdBdf) amd = &d;
  ASSERT_NE(amd, nullptr);
  EXPECT_EQ(amd->clients, 6u);
  const std::uint64_t attributedGtt = 4 * kGiB + 1 * kMiB + 2 * kGiB + 8 * kMiB + 4 * kMiB;
  const std::uint64_t attributedVram = 512 * kMiB + 2 * kMiB;
  EXPECT_EQ(resident(amd->attributed, "gtt"), attributedGtt);
  EXPECT_EQ(resident(amd->attributed, "vram"), attributedVram);
  EXPECT_EQ(amd->unattributed.at("gtt"), static_cast<std::int64_t>(kGttUsed - attributedGtt));
  EXPECT_EQ(amd->unattributed.at("vram"), static_cast<std::int64_t>(kVramUsed - attributedVram));
  EXPECT_EQ(amd->unattributed.count("vis_vram"), 0u);  // no used figure exported
  EXPECT_EQ(amd->gttHeadroomBytes, std::min(kGttTotal - kGttUsed, kMemAvailable));
  // The 5.14 clients print no drm-total: the device's total sum is unknown, not short.
  EXPECT_FALSE(amd->attributed.at("gtt").total.get().has_value());
  const gpumem::DeviceSummary* xe = nullptr;
  for (const auto& d : agg.devices)
    if (d.device->key == kXeBdf) xe = &d;
  ASSERT_NE(xe, nullptr);
  EXPECT_TRUE(xe->unattributed.empty());
  EXPECT_FALSE(xe->gttHeadroomBytes.has_value());
  EXPECT_TRUE(xe->gttHeadroomUnknown.has_value());
}

TEST_F(ScannerTest, CgroupScopedScan) {
  Scanner scanner(*proc, *sys);
  auto scan = scanner.scanCgroup(*cgroup, "/system.slice/llama.service");
  ASSERT_TRUE(scan) << scan.error().message;
  EXPECT_EQ(scan->scopeCgroup, "/system.slice/llama.service");
  ASSERT_EQ(scan->processes.size(), 2u);
  EXPECT_EQ(scan->processes[0].cgroup, "/system.slice/llama.service");
  EXPECT_EQ(scan->processes[1].cgroup, "/system.slice/llama.service/worker");
  EXPECT_EQ(scanner.stats().pidsVisited, 2u);  // nothing outside the subtree is touched
  auto agg = gpumem::aggregate(*scan, host::Snapshot{});
  gpumem::RegionMap lease;
  for (const auto& g : agg.cgroups) gpumem::addInto(lease, g.regions);
  EXPECT_EQ(resident(lease, "gtt"), 4 * kGiB + 1 * kMiB);
  EXPECT_EQ(resident(lease, "vram"), 512 * kMiB);
  for (const auto& d : agg.devices) EXPECT_TRUE(d.unattributed.empty());
}

TEST_F(ScannerTest, CgroupScanDropsVanishedPids) {
  Scanner scanner(*proc, *sys);
  auto scan = scanner.scanCgroup(*cgroup, "system.slice");
  ASSERT_TRUE(scan);
  std::vector<pid_t> pids;
  for (const auto& p : scan->processes) pids.push_back(p.pid);
  EXPECT_EQ(pids, (std::vector<pid_t>{100, 101, 400}));  // 600 listed but gone
  EXPECT_TRUE(scan->unreadable.empty());
  EXPECT_EQ(scanner.stats().pidsVanished, 1u);
}

// /proc/<pid>/fd lists the thread-group leader's table only: a thread that
// unshared its table (unshare(CLONE_FILES)) and opened the GPU there hid its
// memory from the fallback meter. Thread tables are walked too, and their
// clients deduplicated by drm-client-id (a table copied from the leader's
// holds the leader's clients), in a host scan and in a meter's held scan.
TEST_F(ScannerTest, AThreadsOwnFdTableIsSeenAndItsCopiesAreOneClient) {
  FakeProcess p;
  p.pid = 900;
  p.comm = "hider";
  p.cgroup = "/hide";
  p.fds = {{0, std::nullopt, "null", "", false},
           {4, 128u, "", amdgpuFdinfo(78, kAmdBdf, 2048, 0), false}};
  p.threadFds[901] = {{3, 128u, "", amdgpuFdinfo(77, kAmdBdf, 1024 * 1024, 0), false}};
  // A table copied from the leader's: the same client at the same fd.
  p.threadFds[902] = {{4, 128u, "", amdgpuFdinfo(78, kAmdBdf, 2048, 0), false}};
  host.addProcess(p);
  host.addCgroup("/hide", {900});
  for (bool held : {false, true}) {
    SCOPED_TRACE(held ? "a meter's held scan" : "a host scan");
    Scanner scanner(*proc, *sys);
    ProcHandles handles;
    if (held) scanner.useHandles(&handles);
    auto scan = held ? scanner.scanCgroup(*cgroup, "/hide") : scanner.scanHost();
    ASSERT_TRUE(scan) << scan.error().message;
    const Process* hider = process(*scan, 900);
    ASSERT_NE(hider, nullptr);
    EXPECT_EQ(hider->clients.size(), 2u);
    const Client* hidden = client(*scan, kAmdBdf, 77);
    ASSERT_NE(hidden, nullptr) << "the thread's own table is walked";
    EXPECT_EQ(hidden->owner, 900);
    const Client* copied = client(*scan, kAmdBdf, 78);
    ASSERT_NE(copied, nullptr);
    EXPECT_EQ(copied->holders.size(), 1u) << "a copied fd is the same holder, counted once";
    EXPECT_EQ(scanner.stats().threadTables, 2u);
    auto agg = gpumem::aggregate(*scan, host::Snapshot{});
    gpumem::RegionMap hiders;
    for (const auto& g : agg.cgroups)
      if (g.path == "/hide") gpumem::addInto(hiders, g.regions);
    EXPECT_EQ(resident(hiders, "gtt"), 1 * kGiB + 2 * kMiB);  // 1 GiB + 2 MiB, never twice
  }
}

// A driver that prints no drm-client-id: a thread's table copied from the
// leader's holds the leader's fd under the leader's number, and that is one
// client, never two (twice the memory could kill a lease for nothing).
TEST_F(ScannerTest, AThreadsCopyOfAnFdWithoutAClientIdIsCountedOnce) {
  const std::string legacy =
      "pos:\t0\nflags:\t02\nmnt_id:\t1\npdev:\t0000:c6:00.0\npasid:\t32769\n"
      "vram mem:\t0 kB\ngtt mem:\t4096 kB\ncpu mem:\t0 kB\n";
  FakeProcess p;
  p.pid = 910;
  p.cgroup = "/legacy-copy";
  p.fds = {{5, 128u, "", legacy, false}};
  p.threadFds[911] = {{5, 128u, "", legacy, false}, {6, 128u, "", legacy, false}};
  host.addProcess(p);
  Scanner scanner(*proc, *sys);
  auto scan = scanner.scanHost();
  ASSERT_TRUE(scan);
  const Process* got = process(*scan, 910);
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->clients.size(), 2u) << "fd 5 (the leader's, copied) and the thread's own fd 6";
  auto agg = gpumem::aggregate(*scan, host::Snapshot{});
  gpumem::RegionMap counted;
  for (const auto& g : agg.cgroups)
    if (g.path == "/legacy-copy") gpumem::addInto(counted, g.regions);
  EXPECT_EQ(resident(counted, "gtt"), 8 * kMiB);
}

// An exit is quiet; kernel text that does not parse is not: the process is
// left out with the reason, never reported with a made-up start time.
TEST_F(ScannerTest, UnparsableStatIsUnreadableWithTheReason) {
  writeFile(host.procRoot() + "/400/stat", "400 (truncated");
  Scanner scanner(*proc, *sys);
  auto scan = scanner.scanCgroup(*cgroup, "system.slice");
  ASSERT_TRUE(scan);
  EXPECT_EQ(process(*scan, 400), nullptr);
  ASSERT_EQ(scan->unreadable.size(), 1u);
  EXPECT_EQ(scan->unreadable[0].pid, 400);
  EXPECT_EQ(scan->unreadable[0].reason, "cannot parse /proc/400/stat");
}

TEST_F(ScannerTest, CgroupScanOfMissingCgroupIsAnError) {
  Scanner scanner(*proc, *sys);
  auto scan = scanner.scanCgroup(*cgroup, "/no/such.scope");
  ASSERT_FALSE(scan);
  EXPECT_NE(scan.error().message.find("/no/such.scope"), std::string::npos);
}

TEST_F(ScannerTest, CgroupOutsideReadersNamespace) {
  FakeProcess p{902, "foreign", "/../../system.slice/docker-abc.scope", "", 5, {}, 0, {}, false};
  p.fds = {{3, 128u, "", amdgpuFdinfo(92, kAmdBdf, 4, 0), false}};
  host.addProcess(p);
  Scanner scanner(*proc, *sys);
  auto scan = scanner.scanHost();
  ASSERT_TRUE(scan);
  const Process* f = process(*scan, 902);
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(f->cgroupOutsideNamespace);
  EXPECT_EQ(f->cgroup, "/../../system.slice/docker-abc.scope");
}

TEST_F(ScannerTest, CgroupScanRefusesPathsOutsideTheRoot) {
  Scanner scanner(*proc, *sys);
  for (const char* bad : {"/..", "../proc", "/system.slice/../../x", "a/.."}) {
    auto scan = scanner.scanCgroup(*cgroup, bad);
    ASSERT_FALSE(scan) << bad;
    EXPECT_EQ(scan.error().code, EINVAL) << bad;
  }
  auto named = scanner.scanCgroup(*cgroup, "/system.slice/..llama");  // a name, not '..': looked up
  ASSERT_FALSE(named);
  EXPECT_EQ(named.error().code, ENOENT);
}

TEST_F(ScannerTest, DeletedCgroupAndV1OnlyProcess) {
  FakeProcess zombie{900, "zombie", "",   "0::/tally.slice/tally-1.scope (deleted)\n", 5, {},
                     0,   {},       false};
  zombie.fds = {{3, 128u, "", amdgpuFdinfo(90, kAmdBdf, 4, 0), false}};
  host.addProcess(zombie);
  FakeProcess v1{901, "v1only", "", "4:memory:/x\n1:name=systemd:/y\n", 5, {}, 0, {}, false};
  v1.fds = {{3, 128u, "", amdgpuFdinfo(91, kAmdBdf, 4, 0), false}};
  host.addProcess(v1);
  Scanner scanner(*proc, *sys);
  auto scan = scanner.scanHost();
  ASSERT_TRUE(scan);
  const Process* z = process(*scan, 900);
  ASSERT_NE(z, nullptr);
  EXPECT_TRUE(z->cgroupDeleted);
  EXPECT_EQ(z->cgroup, "/tally.slice/tally-1.scope");
  EXPECT_FALSE(z->cgroupOutsideNamespace);
  const Process* v = process(*scan, 901);
  ASSERT_NE(v, nullptr);
  EXPECT_FALSE(v->cgroup.has_value());
  EXPECT_TRUE(v->cgroupUnknownReason.has_value());
}

TEST_F(ScannerTest, MinorAppearingAfterDiscoveryResolvesThroughDevChar) {
  // A node present only under dev/char (hot-plugged): found through 226:<minor>.
  makeDirs(host.sysRoot() + "/devices/pci0000:00/0000:c6:00.0/drm/renderD130");
  writeFile(host.sysRoot() + "/devices/pci0000:00/0000:c6:00.0/drm/renderD130/dev", "226:130\n");
  makeSymlink("../../../0000:c6:00.0",
              host.sysRoot() + "/devices/pci0000:00/0000:c6:00.0/drm/renderD130/device");
  makeSymlink("../../devices/pci0000:00/0000:c6:00.0/drm/renderD130",
              host.sysRoot() + "/dev/char/226:130");
  FakeProcess late{950, "late", "/late.scope", "", 5, {}, 0, {}, false};
  late.fds = {{3, 130u, "", amdgpuFdinfo(95, kAmdBdf, 4, 0), false}};
  host.addProcess(late);
  Scanner scanner(*proc, *sys);
  auto scan = scanner.scanHost();
  ASSERT_TRUE(scan);
  const Client* c = client(*scan, kAmdBdf, 95);
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->device);
  EXPECT_EQ(scan->devices.devices[*c->device].key, kAmdBdf);
  EXPECT_EQ(scan->devices.devices[*c->device].nodes.size(), 3u);
}

// Client ids are only unique per device on older kernels: the key is
// (pdev, id), so the same id on two devices is two clients.
TEST_F(ScannerTest, SameClientIdOnTwoDevicesIsTwoClients) {
  FakeProcess p{970, "twodev", "/two.scope", "", 5, {}, 0, {}, false};
  p.fds = {{3, 128u, "", amdgpuFdinfo(3, kAmdBdf, 64, 0), false}};  // xe's client 3 exists too
  host.addProcess(p);
  Scanner scanner(*proc, *sys);
  auto scan = scanner.scanHost();
  ASSERT_TRUE(scan);
  ASSERT_NE(client(*scan, kAmdBdf, 3), nullptr);
  ASSERT_NE(client(*scan, kXeBdf, 3), nullptr);
  EXPECT_NE(client(*scan, kAmdBdf, 3), client(*scan, kXeBdf, 3));
}

// Without drm-pdev (a platform device such as vgem) the minor scopes the id.
TEST_F(ScannerTest, NonPciDeviceKeysClientsByMinor) {
  host.addDevice({"vgem", "vgem", {3, 131}, {}, false});
  const std::string f =
      "drm-driver:\tvgem\ndrm-client-id:\t1\ndrm-total-memory:\t4 MiB\n"
      "drm-resident-memory:\t4 MiB\n";
  FakeProcess p{980, "vgemuser", "/vgem.scope", "", 5, {}, 0, {}, false};
  p.fds = {{3, 131u, "", f, false}, {4, 131u, "", f, false}, {5, 3u, "", f, false}};
  host.addProcess(p);
  Scanner scanner(*proc, *sys);
  auto scan = scanner.scanHost();
  ASSERT_TRUE(scan);
  std::vector<const Client*> vgem;
  for (const auto& c : scan->clients)
    if (c.info.driver == "vgem") vgem.push_back(&c);
  ASSERT_EQ(vgem.size(), 2u);  // fds 3+4 on renderD131 are one client; card3's id 1 is another
  // Clients are sorted by minor: card3's first, then renderD131's.
  EXPECT_EQ(vgem[0]->minor, 3u);
  EXPECT_EQ(vgem[0]->holders.size(), 1u);
  EXPECT_EQ(vgem[1]->minor, 131u);
  EXPECT_EQ(vgem[1]->holders.size(), 2u);
  ASSERT_TRUE(vgem[0]->device);
  const auto& dev = scan->devices.devices[*vgem[0]->device];
  EXPECT_EQ(dev.key, "vgem");
  EXPECT_FALSE(dev.pdev.has_value());  // not PCI: no BDF is invented
  EXPECT_EQ(dev.driver, "vgem");
}

// An fdinfo larger than the single-read stack buffer is read on, not cut.
TEST_F(ScannerTest, FdinfoLargerThanTheReadBuffer) {
  std::string big = "drm-driver:\tamdgpu\ndrm-client-name:\t" + std::string(20000, 'n') +
                    "\ndrm-client-id:\t77\ndrm-pdev:\t0000:c6:00.0\ndrm-resident-gtt:\t5 MiB\n";
  FakeProcess p{960, "bigname", "/big.scope", "", 5, {}, 0, {}, false};
  p.fds = {{3, 128u, "", big, false}};
  host.addProcess(p);
  Scanner scanner(*proc, *sys);
  auto scan = scanner.scanHost();
  ASSERT_TRUE(scan);
  const Client* c = client(*scan, kAmdBdf, 77);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->info.clientName->size(), 20000u);
  EXPECT_EQ(c->info.region("gtt")->resident, 5 * kMiB);
}

// A process whose fds the scanner may not read is listed as unreadable, with
// the reason, never as a process with zero GPU memory. Run unprivileged in a
// child (root would bypass the permission check).
TEST_F(ScannerTest, UnreadableProcessIsReportedNotZero) {
  ASSERT_EQ(::geteuid(), 0u) << "this test drops from root to nobody to meet EACCES";
  FakeProcess secret{990, "secret", "/secret.scope", "", 5, {}, 0, {}, false};
  secret.fds = {{3, 128u, "", amdgpuFdinfo(99, kAmdBdf, 4, 0), false}};
  host.addProcess(secret);
  ASSERT_EQ(::chmod((host.procRoot() + "/990/fd").c_str(), 0700), 0);
  // 991: its fds can be listed, but not their fdinfo.
  FakeProcess halfSecret{991, "halfsecret", "/secret.scope", "", 5, {}, 0, {}, false};
  halfSecret.fds = {{3, 128u, "", amdgpuFdinfo(98, kAmdBdf, 4, 0), false}};
  host.addProcess(halfSecret);
  ASSERT_EQ(::chmod((host.procRoot() + "/991/fdinfo").c_str(), 0700), 0);
  int pipeFds[2];
  ASSERT_EQ(::pipe(pipeFds), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(pipeFds[0]);
    if (::setgroups(0, nullptr) != 0 || ::setresgid(65534, 65534, 65534) != 0 ||
        ::setresuid(65534, 65534, 65534) != 0)
      ::_exit(90);
    Scanner s(*proc, *sys);
    auto scan = s.scanHost();
    std::string out;
    if (scan) {
      for (const auto& u : scan->unreadable) out += std::to_string(u.pid) + "|" + u.reason + "\n";
      for (const auto& p : scan->processes)
        if (p.pid == 990 || p.pid == 991) out += "LISTED\n";
    } else {
      out = "ERROR " + scan.error().message;
    }
    if (::write(pipeFds[1], out.data(), out.size()) < 0) ::_exit(91);
    ::_exit(0);
  }
  ::close(pipeFds[1]);
  std::string got;
  char buf[4096];
  for (ssize_t n; (n = ::read(pipeFds[0], buf, sizeof buf)) > 0;)
    got.append(buf, static_cast<std::size_t>(n));
  ::close(pipeFds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  EXPECT_NE(got.find("990|cannot open fd directory of pid 990: Permission denied"),
            std::string::npos)
      << got;
  EXPECT_NE(got.find("991|cannot read fdinfo of pid 991: Permission denied"), std::string::npos)
      << got;
  EXPECT_NE(got.find("CAP_SYS_PTRACE"), std::string::npos);
  EXPECT_EQ(got.find("LISTED"), std::string::npos);
}

TEST_F(ScannerTest, JsonDocumentCarriesSourcesAndOwnership) {
  Scanner scanner(*proc, *sys);
  auto scan = scanner.scanHost();
  ASSERT_TRUE(scan);
  host::Snapshot facts;
  facts.meminfo.memAvailable = kMemAvailable;
  auto agg = gpumem::aggregate(*scan, facts);
  auto doc = report::gpuJson(*scan, agg, facts);
  EXPECT_EQ(doc["schema"], 1);
  EXPECT_EQ(doc["status"], "ok");
  const auto& p101 = doc["processes"][1];
  EXPECT_EQ(p101["pid"], 101);
  EXPECT_EQ(p101["clients"][0]["owner"], false);
  EXPECT_EQ(p101["clients"][0]["owner_pid"], 100);
  EXPECT_EQ(p101["clients"][0]["source"], "drm-fdinfo");
  EXPECT_EQ(p101["clients"][0]["regions"]["gtt"]["resident_bytes"], 4 * kGiB);
  EXPECT_EQ(p101["clients"][0]["regions"]["gtt"]["resident_source"], "drm-resident");
  EXPECT_EQ(p101["clients"][0]["holders"].size(), 3u);
  EXPECT_EQ(p101["clients"][0]["regions"]["gtt"]["purgeable_bytes"], 0);
  EXPECT_EQ(p101["clients"][0]["engines"]["gfx"]["busy_ns"], 1000);
  const auto& p400 = doc["processes"][5];
  EXPECT_EQ(p400["pid"], 400);
  EXPECT_EQ(p400["clients"][0]["regions"]["gtt"]["resident_source"], "amdgpu-5.14");
  EXPECT_FALSE(p400["clients"][0]["regions"]["gtt"].contains("total_bytes"));  // absent, never 0
  EXPECT_TRUE(p400["clients"][0]["client_id"].is_null());
  EXPECT_EQ(doc["processes"][6]["kfd"]["vram_flagged_bytes"], kGiB);
  EXPECT_EQ(doc["processes"][6]["kfd"]["source"], "kfd-sysfs");
  EXPECT_FALSE(doc["processes"][0].contains("kfd"));  // not a KFD process: no figure at all
}

}  // namespace
}  // namespace tally::scanner
