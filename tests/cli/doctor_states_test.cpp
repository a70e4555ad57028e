// `tally doctor` on fixture trees for the kernel states of docs/coverage.md:
// each tree is built here, and its full report must equal the expected one in
// tests/fixtures/doctor/<state>.txt (the temp root printed as <root>), with
// the exit status the docs promise. TALLY_UPDATE_GOLDEN=1 rewrites the files
// (then review the diff: they are the specification).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <nlohmann/json.hpp>

#include "support/fake_host.h"
#include "support/transcript.h"

namespace tally {
namespace {

using namespace tally::testing;
constexpr std::uint64_t GiB = 1ULL << 30;

struct Out {
  int status = -1;
  std::string out;
};

Out doctor(const FakeHost& host, const std::string& extra) {
  std::string cmd = std::string(TALLY_BINARY) + " doctor " + extra + " --proc-root " +
                    host.procRoot() + " --sys-root " + host.sysRoot() + " --cgroup-root " +
                    host.cgroupRoot() + " 2>/dev/null";
  Out r;
  FILE* f = ::popen(cmd.c_str(), "r");
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) r.out.append(buf, n);
  int st = ::pclose(f);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  for (std::size_t at; (at = r.out.find(host.root())) != std::string::npos;)
    r.out.replace(at, host.root().size(), "<root>");
  return r;
}

// A Strix Halo box under systemd, as every state shares it: one amdgpu APU
// with 1 GiB VRAM carve-out and 112 GiB of GTT, tally running in
// /system.slice/tally.service.
void strixHalo(FakeHost& host, const std::string& kernel, const std::string& rootControllers,
               const std::string& rootSubtree) {
  writeFile(host.procRoot() + "/1/comm", "systemd\n");
  writeFile(host.procRoot() + "/sys/kernel/osrelease", kernel + "\n");
  writeFile(host.procRoot() + "/self/cgroup", "0::/system.slice/tally.service\n");
  writeFile(host.procRoot() + "/self/mountinfo",
            "30 24 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 "
            "rw,nsdelegate\n");
  writeFile(host.cgroupRoot() + "/cgroup.controllers", rootControllers + "\n");
  writeFile(host.cgroupRoot() + "/cgroup.subtree_control", rootSubtree + "\n");
  writeFile(host.cgroupRoot() + "/system.slice/tally.service/memory.stat",
            "anon 1048576\nfile 2097152\n");
  FakeDevice apu;
  apu.bdf = "0000:c6:00.0";
  apu.memInfo = {{"gtt_total", 112 * GiB},
                 {"gtt_used", 1590456320},
                 {"vram_total", GiB},
                 {"vram_used", 1006202880}};
  host.addDevice(apu);
  host.setModuleParam("ttm", "pages_limit", "29360128");  // 112 GiB in 4 KiB pages
  // /proc/cgroups: every controller the kernel was built with (dmem only
  // where the root offers it, as on the kernels these states stand for).
  std::string builtIn =
      "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpuset\t0\t80\t1\n"
      "cpu\t0\t80\t1\nio\t0\t80\t1\nmemory\t0\t80\t1\npids\t0\t80\t1\n";
  if (rootControllers.find("dmem") != std::string::npos) builtIn += "dmem\t0\t80\t1\n";
  writeFile(host.procRoot() + "/cgroups", builtIn);
}

// A static sign by name from `tally doctor --json`.
nlohmann::json sign(const nlohmann::json& doc, const std::string& name) {
  for (const auto& s : doc["gtt_memcg_coverage"]["static_signs"])
    if (s["name"] == name) return s;
  ADD_FAILURE() << "no sign " << name;
  return nullptr;
}

void check(const std::string& state, const Out& r, int status) {
  std::string path = std::string(TALLY_SOURCE_DIR) + "/tests/fixtures/doctor/" + state + ".txt";
  if (std::getenv("TALLY_UPDATE_GOLDEN")) writeFile(path, r.out);
  EXPECT_EQ(r.out, readFile(path))
      << "tally doctor on the " << state << " tree differs from " << path;
  EXPECT_EQ(r.status, status) << r.out;
}

TEST(DoctorStates, Bookworm61NoDmemHostMemoryOnly) {
  FakeHost host;
  strixHalo(host, "6.1.0-28-amd64", "cpuset cpu io memory hugetlb pids rdma misc",
            "cpuset cpu io memory pids");
  auto report = doctor(host, "");
  check("bookworm-6.1", report, 0);
  // docs/doctor.md quotes this state's basis and verdict.
  for (const auto& d :
       pageDifferences("docs/doctor.md", "tests/cli/doctor_states_test.cpp#bookworm", report.out))
    ADD_FAILURE() << d;
  auto j = nlohmann::json::parse(doctor(host, "--json").out);
  EXPECT_EQ(j["gtt_memcg_coverage"]["coverage"], "host");
  EXPECT_EQ(j["dmem"]["present"], false);
  EXPECT_EQ(j["cgroup"]["memory_delegated"], true);
  EXPECT_EQ(j["dmem"]["compiled_in"], false);
  EXPECT_EQ(j["gpu_devices"][0]["gtt_ceiling"]["graphics"]["bytes"], 112 * GiB);
  // Before 6.5 KFD's TTM limit was 3/8 of the RAM free when amdgpu loaded:
  // unknowable now, so the compute ceiling is unknown, never pages_limit.
  EXPECT_TRUE(j["gpu_devices"][0]["gtt_ceiling"]["compute"]["bytes"].is_null());
  EXPECT_EQ(j["gpu_devices"][0]["rocm_device_memory"]["where"], "vram");
  EXPECT_EQ(j["kfd_limits_era"], "before 6.5");
  // GTT not charged and bounded by tally: today's normal AMD state, healthy.
  EXPECT_EQ(j["exit_status"], 0);
  EXPECT_EQ(j["degraded"], nlohmann::json::array());
}

TEST(DoctorStates, Linux71DmemVramAtRootOnly) {
  FakeHost host;
  strixHalo(host, "7.1.8-1-cachyos", "cpuset cpu io memory hugetlb pids rdma misc dmem",
            "cpuset cpu io memory pids");
  writeFile(host.cgroupRoot() + "/dmem.capacity",
            readFile(std::string(TALLY_FIXTURE_DIR) + "/dmem/dmem.capacity.strixhalo-7.1.8"));
  writeFile(
      host.procRoot() + "/meminfo",
      "MemTotal:       131072000 kB\nMemAvailable:   65536000 kB\nGPUActive:       1553180 kB\n");
  check("v7.1-dmem-vram", doctor(host, ""), 0);
  auto j = nlohmann::json::parse(doctor(host, "--json").out);
  EXPECT_EQ(j["dmem"]["present"], true);
  EXPECT_EQ(j["dmem"]["regions"][0],
            nlohmann::json({{"name", "drm/0000:c6:00.0/vram"}, {"bytes", GiB}, {"kind", "vram"}}));
  EXPECT_EQ(j["gpu_active_bytes"], 1553180ULL * 1024);
  EXPECT_EQ(sign(j, "/proc/meminfo GPUActive")["suggests_charging"], false);
  EXPECT_EQ(j["dmem"]["chain"][0]["available"], true);
  EXPECT_EQ(j["dmem"]["chain"][0]["enabled_for_children"], false);
  EXPECT_EQ(j["dmem"]["reaches_leases"], false);
  EXPECT_EQ(j["dmem"]["compiled_in"], true);
  EXPECT_EQ(j["gtt_memcg_coverage"]["coverage"], "host");
  // KFD's caps on a 125 GiB host: the GTT manager and pages_limit (112 GiB),
  // its system limit 125 GiB - 125 GiB/64 - 1.5 GiB = 130509963264 bytes.
  const auto& compute = j["gpu_devices"][0]["gtt_ceiling"]["compute"];
  EXPECT_EQ(compute["bytes"], 112 * GiB);
  EXPECT_EQ(compute["terms"][2]["bytes"], 130509963264u);
  EXPECT_EQ(j["gpu_devices"][0]["rocm_device_memory"]["where"], "gtt");
}

// This machine's own state: /sys/fs/cgroup is not a cgroup2 root (a v1 or
// tmpfs mount). dmem cannot be judged from files that cannot exist there
// (unknown, never "absent"), /proc/cgroups still says whether the kernel has
// dmem at all, and no lease placement is printed where none can be made.
TEST(DoctorStates, NoCgroup2RootLeavesDmemUnknownAndPlacesNoLease) {
  FakeHost host;
  writeFile(host.procRoot() + "/1/comm", "process_api\n");
  writeFile(host.procRoot() + "/sys/kernel/osrelease", "6.1.0-28-amd64\n");
  writeFile(host.procRoot() + "/self/mountinfo",
            "41 30 0:38 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n");
  writeFile(host.procRoot() + "/cgroups",
            "#subsys_name\thierarchy\tnum_cgroups\tenabled\nmemory\t4\t80\t1\n");
  auto r = doctor(host, "");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("leases       none can be made here (no systemd (PID 1 is process_api); "),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("live under"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("dmem         unknown (<root>/cgroup is not a cgroup v2 root: unknown "
                       "there); this kernel has no dmem controller (/proc/cgroups)\n"),
            std::string::npos)
      << r.out;
  auto j = nlohmann::json::parse(doctor(host, "--json").out);
  EXPECT_TRUE(j["dmem"]["present"].is_null());
  EXPECT_EQ(j["dmem"]["compiled_in"], false);
  EXPECT_TRUE(j["cgroup"]["leases_live_under"].is_null());
  for (const char* name : {"dmem regions", "dmem.memcg", "memory.stat gpu_active"}) {
    EXPECT_TRUE(sign(j, name)["present"].is_null()) << name;
    EXPECT_NE(sign(j, name)["evidence"].get<std::string>().find("is not a cgroup v2 root"),
              std::string::npos)
        << name;
  }
}

TEST(DoctorStates, FutureKernelWithGpuActiveAndTtmMemcgIsUnverifiedWithoutTheProbe) {
  FakeHost host;
  strixHalo(host, "7.3.0-1-amd64", "cpuset cpu io memory hugetlb pids rdma misc dmem",
            "cpuset cpu io memory pids dmem");
  writeFile(host.cgroupRoot() + "/system.slice/tally.service/memory.stat",
            "anon 1048576\nfile 2097152\ngpu_active 0\ngpu_reclaim 0\n");
  host.setModuleParam("ttm", "ttm_memcg", "Y");
  writeFile(host.cgroupRoot() + "/dmem.capacity", "drm/0000:c6:00.0/vram 1073741824\n");
  writeFile(
      host.procRoot() + "/meminfo",
      "MemTotal:       131072000 kB\nMemAvailable:   65536000 kB\nGPUActive:       1553180 kB\n");
  check("future-gpu-active", doctor(host, ""), 0);
  auto j = nlohmann::json::parse(doctor(host, "--json").out);
  EXPECT_EQ(sign(j, "memory.stat gpu_active")["present"], true);
  EXPECT_EQ(sign(j, "ttm.ttm_memcg")["present"], true);
  EXPECT_EQ(j["gtt_memcg_coverage"]["coverage"], "host");  // a sign is not proof
  EXPECT_EQ(j["dmem"]["reaches_leases"], true);
}

TEST(DoctorStates, DmemGttRegionIsReportedAsADifferentPath) {
  FakeHost host;
  strixHalo(host, "7.4.0-1-amd64", "cpuset cpu io memory hugetlb pids rdma misc dmem",
            "cpuset cpu io memory pids dmem");
  writeFile(host.cgroupRoot() + "/dmem.capacity",
            "drm/0000:c6:00.0/vram 1073741824\ndrm/0000:c6:00.0/gtt 120259084288\n");
  check("dmem-gtt", doctor(host, ""), 0);
  auto j = nlohmann::json::parse(doctor(host, "--json").out);
  // A dmem GTT region is a limit tally could set, never a sign of memcg charging.
  EXPECT_EQ(sign(j, "dmem regions")["present"], true);
  EXPECT_EQ(sign(j, "dmem regions")["suggests_charging"], false);
  EXPECT_EQ(j["dmem"]["regions"][1]["kind"], "gtt");
  const std::string basis = j["gtt_memcg_coverage"]["basis"];
  EXPECT_NE(basis.find("drm/0000:c6:00.0/gtt"), std::string::npos);
  EXPECT_EQ(basis.find("suggest"), std::string::npos) << basis;
}

// The cgroup-v2 documentation's own example region, stolen, is neither VRAM
// nor GTT: it is shown as of unknown kind, and nothing says GTT of it. AMD's
// DKMS driver is loaded beside the in-tree ttm: each module's option is read.
TEST(DoctorStates, DmemStolenRegionIsNeverGtt) {
  FakeHost host;
  strixHalo(host, "6.15.0-1-amd64", "cpuset cpu io memory hugetlb pids rdma misc dmem",
            "cpuset cpu io memory pids dmem");
  writeFile(host.cgroupRoot() + "/dmem.capacity",
            "drm/0000:03:00.0/vram0 8514437120\ndrm/0000:03:00.0/stolen 67108864\n");
  host.setModuleParam("amdttm", "pages_limit", "29360128");
  host.addModuleHolder("amdttm", "amdgpu");
  check("dmem-stolen", doctor(host, ""), 0);
  auto j = nlohmann::json::parse(doctor(host, "--json").out);
  EXPECT_EQ(j["dmem"]["regions"][1],
            nlohmann::json(
                {{"name", "drm/0000:03:00.0/stolen"}, {"bytes", 67108864}, {"kind", "unknown"}}));
  EXPECT_EQ(sign(j, "dmem regions")["suggests_charging"], false);
  EXPECT_EQ(sign(j, "amdttm.ttm_memcg")["present"], false);
  const std::string basis = j["gtt_memcg_coverage"]["basis"];
  EXPECT_EQ(basis,
            "no sign that this kernel charges GTT to memcg; tally bounds GTT itself "
            "(gpu_memory_max, from DRM fdinfo)");
  EXPECT_EQ(j["gpu_devices"][0]["gtt_ceiling"]["ttm_module"], "amdttm");
}

TEST(DoctorStates, NoGpuAndFullContainmentIsNotDegraded) {
  FakeHost host;
  writeFile(host.procRoot() + "/1/comm", "systemd\n");
  writeFile(host.procRoot() + "/sys/kernel/osrelease", "6.12.9-amd64\n");
  writeFile(host.cgroupRoot() + "/cgroup.controllers", "cpuset cpu io memory pids\n");
  writeFile(host.cgroupRoot() + "/cgroup.subtree_control", "cpu memory pids\n");
  auto r = doctor(host, "");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("A lease's MemoryMax covers: host memory only\n"), std::string::npos);
  // An unusable --probe-size is a usage error, before anything is probed.
  EXPECT_EQ(doctor(host, "--active --probe-size 1").status, 2);
}

// The report of the machine the suite runs on, without fixture roots. The
// docs quote it as on this project's CI machine (no systemd, memory on cgroup
// v1, no DRM device); on another layout it is printed, not compared.
TEST(DoctorStates, ThisHostsReportIsTheOneTheDocsQuoteForTheBuildMachine) {
  std::string pid1 = readFile("/proc/1/comm");
  while (!pid1.empty() && pid1.back() == '\n') pid1.pop_back();
  std::string release = readFile("/proc/sys/kernel/osrelease");
  while (!release.empty() && release.back() == '\n') release.pop_back();
  Out r;
  FILE* f = ::popen((std::string(TALLY_BINARY) + " doctor 2>/dev/null").c_str(), "r");
  ASSERT_NE(f, nullptr);
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) r.out.append(buf, n);
  int st = ::pclose(f);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  ASSERT_NE(r.out.find("A lease's MemoryMax covers: "), std::string::npos) << r.out;
  bool buildMachine = pid1.rfind("systemd", 0) != 0 &&
                      r.out.find("memory       controller: cgroup v1") != std::string::npos &&
                      r.out.find("gpu          no DRM devices") != std::string::npos;
  if (!buildMachine) {
    std::printf("not the build machine's layout the docs quote: not compared\n%s", r.out.c_str());
    return;
  }
  EXPECT_EQ(r.status, 1) << r.out;  // degraded: no lease can be contained here
  // The machine's own names read as the page's: its PID 1 and kernel build.
  std::string said = r.out;
  for (auto [mine, page] :
       {std::pair{"PID 1 is " + pid1, std::string("PID 1 is process_api")},
        std::pair{"kernel       " + release, std::string("kernel       6.18.44-fc-v595")}})
    for (std::size_t at = 0; (at = said.find(mine, at)) != std::string::npos; at += page.size())
      said.replace(at, mine.size(), page);
  std::string produced = "$ tally doctor\n" + said + fmt::format("[exit status {}]\n", r.status);
  for (const char* page : {"docs/coverage.md", "docs/doctor.md"})
    for (const auto& d :
         pageDifferences(page, "tests/cli/doctor_states_test.cpp#this-host", produced))
      ADD_FAILURE() << d << "(this run printed:)\n" << produced;
}

}  // namespace
}  // namespace tally
