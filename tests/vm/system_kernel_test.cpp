// tally's figures against each kernel's own DRM core and TTM (VmKernel): the
// test driver reloaded to play other drivers' fdinfo and amdgpu's older
// accounting. The fixture: system_fixture.h. VM harness only.
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>

#include "support/page_quotes.h"
#include "system_fixture.h"

namespace tally {
namespace {

using namespace tally::vmsystem;

// The kernel-facing subset, run on every kernel of the matrix (6.1, 6.12, 7.x;
// scripts/test.sh): the test driver reloaded to play other drivers' fdinfo and
// amdgpu's older accounting, each figure checked against what that kernel's DRM
// core printed. The driver is put back as it was after each test.
class VmKernel : public VmSystem {
 protected:
  void TearDown() override { reload(""); }

  static void reload(const std::string& parameters) {
    std::string ko = std::getenv("TALLY_TESTDRM_KO");
    ASSERT_EQ(shell("rmmod tally_testdrm && insmod " + ko + " " + parameters), 0)
        << "cannot reload the test DRM driver with '" << parameters << "'";
  }

  static void setParameter(const std::string& name, const std::string& value) {
    std::ofstream("/sys/module/tally_testdrm/parameters/" + name) << value;
  }

  // One process holding N buffers of `mib` in the driver's region 0 or 1 while
  // `tally gpu --json` looks; returns that process's entry.
  json processSeenByTallyGpu(const std::string& region, int mib, int count) {
    std::string readyFile = "/tmp/tally-kernel-holder.ready";
    ::unlink(readyFile.c_str());
    auto holder = spawnProgram(
        {kWorkload, "gpu", region, std::to_string(mib), std::to_string(count), "60000", readyFile});
    EXPECT_TRUE(eventually([&] { return exists(readyFile); }, 20s));
    auto r = runProgram({kTally, "gpu", "--json"});
    ::kill(holder.pid, SIGKILL);
    waitProgram(holder);
    EXPECT_EQ(r.exitCode(), 0) << r.err;
    auto doc = json::parse(r.out, nullptr, false);
    if (!doc.is_object()) return json();
    for (const auto& p : doc["processes"])
      if (p["pid"] == holder.pid) return p;
    ADD_FAILURE() << "tally gpu did not list the holder:\n" << doc.dump(2);
    return json();
  }
};

// Each played driver's region names, on this kernel's own fdinfo, land in the
// class tally's table gives them, and only device, host-uncharged and
// host-mixed bytes count: i915's system0 is shmem on an integrated part
// (host-charged) and host-mixed on a discrete one (a client printing local0).
TEST_F(VmKernel, EachDriversRegionsAreCountedByTheirClass) {
  struct Case {
    std::string personality, driver, region, name, cls;
    bool counted;
  };
  const std::vector<Case> cases{
      {"amdgpu", "amdgpu", "gtt", "gtt", "host-uncharged", true},
      {"amdgpu", "amdgpu", "vram", "vram", "device", true},
      {"xe", "xe", "gtt", "gtt", "host-uncharged", true},
      {"xe", "xe", "vram", "vram0", "device", true},
      {"i915", "i915", "gtt", "system0", "host-charged", false},
      {"i915-discrete", "i915", "gtt", "system0", "host-mixed", true},
      {"i915-discrete", "i915", "vram", "local0", "device", true},
      {"v3d", "v3d", "gtt", "memory", "host-charged", false},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.personality + " " + c.name);
    reload("personality=" + c.personality);
    json p = processSeenByTallyGpu(c.region, 8, 2);
    ASSERT_TRUE(p.is_object());
    ASSERT_EQ(p["clients"].size(), 1u) << p.dump(2);
    EXPECT_EQ(p["clients"][0]["driver"], c.driver) << p.dump(2);
    EXPECT_EQ(p["regions"][c.name]["resident_bytes"], 16 * kMiB) << p.dump(2);
    EXPECT_EQ(p["regions"][c.name]["class"], c.cls) << p.dump(2);
    EXPECT_EQ(p["counted_bytes"], c.counted ? 16 * kMiB : 0) << p.dump(2);
  }
}

// i915's system memory is shmem, charged to the allocating cgroup: a lease's
// gpu_memory_max must not count it a second time (it would kill a workload that
// is within its bound), and memory.peak must hold it.
TEST_F(VmKernel, HostChargedRegionsAreBoundByMemoryMaxNotCountedTwice) {
  reload("personality=i915 charge_memcg=1");
  auto t = run({"--sample-interval", "100ms", "--gpu-memory-max", "8M"},
               {kWorkload, "gpu", "gtt", "16", "3", "1500"});
  EXPECT_EQ(t.result.exitCode(), 0) << describe(t);
  EXPECT_EQ(t.record["outcome"]["class"], "exited") << describe(t);
  EXPECT_EQ(t.record["gpu"]["region_classes"]["system0"], "host-charged") << describe(t);
  EXPECT_EQ(t.record["gpu"]["peak_bytes"], 0) << describe(t);
  EXPECT_GE(t.record["memory"]["peak_bytes"].get<std::uint64_t>(), 48 * kMiB) << describe(t);
}

// The test driver as itself, one 48 MiB GTT buffer: the fdinfo this kernel's
// DRM core prints for it, as docs/vm-harness.md quotes it (6.12; before 6.5
// the driver prints its own, and the page says how).
TEST_F(VmKernel, TheTestDriversFdinfoIsWhatTheHarnessPageQuotes) {
  reload("");
  std::string readyFile = "/tmp/tally-kernel-fdinfo.ready";
  ::unlink(readyFile.c_str());
  auto holder = spawnProgram({kWorkload, "gpu", "gtt", "48", "1", "60000", readyFile});
  if (!eventually([&] { return exists(readyFile); }, 20s)) {
    ::kill(holder.pid, SIGKILL);  // or the driver stays busy for the next tests' reload
    waitProgram(holder);
    FAIL() << "the holder never made its buffer";
  }
  std::string fdinfo;
  const std::string dir = "/proc/" + std::to_string(holder.pid) + "/fdinfo";
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string text = readFile(dir + "/" + e->d_name);
      if (text.find("drm-driver:") != std::string::npos) fdinfo = text;
    }
    ::closedir(d);
  }
  ::kill(holder.pid, SIGKILL);
  waitProgram(holder);
  ASSERT_NE(fdinfo.find("drm-driver:\ttally_testdrm\n"), std::string::npos) << fdinfo;
  // The DRM core's "48 MiB" (6.5+), or amdgpu's own KiB before it (6.1).
  EXPECT_TRUE(fdinfo.find("drm-total-gtt:\t48 MiB\n") != std::string::npos ||
              fdinfo.find("drm-memory-gtt: \t49152 KiB\n") != std::string::npos)
      << fdinfo;
  const std::string release = readFile("/proc/sys/kernel/osrelease");
  if (release.rfind("6.12.", 0) != 0) {
    std::printf("docs/vm-harness.md quotes 6.12's fdinfo, not %s's: not compared\n%s",
                release.c_str(), fdinfo.c_str());
    return;
  }
  expectPagesQuote({"docs/vm-harness.md"}, "tests/vm/system_kernel_test.cpp#fdinfo", fdinfo);
}

// A driver that prints no memory key (nouveau, virtio_gpu, vmwgfx): the real
// kernel's fdinfo has drm-driver and the client id only. Its client's figure
// is unknown with the driver named, never 0, and a lease's bound on it never
// kills on a figure nobody read (its GPU peak is unknown, not 0 B).
TEST_F(VmKernel, ADriverWithoutMemoryFiguresIsUnknownNeverZero) {
  reload("personality=nouveau");
  json p = processSeenByTallyGpu("gtt", 8, 2);
  ASSERT_TRUE(p.is_object());
  EXPECT_EQ(p["clients"][0]["driver"], "nouveau") << p.dump(2);
  EXPECT_TRUE(p["counted_bytes"].is_null()) << p.dump(2);
  EXPECT_EQ(p["counted_unknown"], "a client of nouveau prints no memory figures") << p.dump(2);
  auto t = run({"--sample-interval", "100ms", "--gpu-memory-max", "8M"},
               {kWorkload, "gpu", "gtt", "16", "3", "1500"});
  EXPECT_EQ(t.result.exitCode(), 0) << describe(t);
  EXPECT_EQ(t.record["outcome"]["class"], "exited") << describe(t);
  EXPECT_GE(t.record["gpu"]["samples_incomplete"].get<std::uint64_t>(), 1u) << describe(t);
  // Only samples before the workload opened the device were known (0 B then):
  // no known figure ever holds its 48 MiB, and the peak says what it covers.
  EXPECT_EQ(t.record["gpu"].value("peak_bytes", std::uint64_t{0}), 0u) << describe(t);
  if (t.record["gpu"].contains("peak_bytes")) {
    EXPECT_NE(t.record["gpu"]["peak_covers"].get<std::string>().find(
                  "a client of nouveau prints no memory figures"),
              std::string::npos)
        << describe(t);
  }
  EXPECT_TRUE(t.record["gpu"]["bound"]["events"].empty()) << describe(t);
}

// amdgpu before its runtime-stats rework counted only buffers on a VM list. The
// driver plays that (count_unmapped=0): an unmapped buffer is invisible, and the
// active probe still measures because it maps its buffer into the GPU VM.
TEST_F(VmKernel, TheProbeMapsItsBufferSoOlderAccountingStillSeesIt) {
  reload("count_unmapped=0");
  json unmapped = processSeenByTallyGpu("gtt", 8, 1);
  EXPECT_EQ(unmapped["counted_bytes"], 0) << "the driver's count_unmapped=0 shows unmapped "
                                             "buffers; the probe test below proves nothing\n"
                                          << unmapped.dump(2);
  for (bool charge : {false, true}) {
    SCOPED_TRACE(charge ? "charge_memcg=1" : "charge_memcg=0");
    setParameter("charge_memcg", charge ? "1" : "0");
    auto r = runProgram({kTally, "doctor", "--active", "--json"});
    json d = json::parse(r.out, nullptr, false);
    ASSERT_FALSE(d.is_discarded()) << r.err;
    const auto& p = d["gtt_memcg_coverage"]["active_probe"];
    EXPECT_EQ(p["outcome"], charge ? "charged" : "not-charged") << p.dump(2);
    EXPECT_EQ(p["delta_drm_total_gtt_bytes"], 64 * kMiB) << p.dump(2);
  }
}

// The real TTM module of this kernel. With no device using it, pages_limit
// reads 0 (TTM sets its default when the first device initialises): tally says
// so instead of a 0-byte ceiling. Set, it is the compute (ROCm) GTT ceiling. A
// missing ttm_memcg option is said as exactly that.
TEST_F(VmKernel, TheKernelsOwnTtmModuleIsReadAsItIs) {
  ASSERT_EQ(shell("modprobe ttm"), 0) << "this kernel's module tree lacks ttm";
  auto ttmEntry = [](const json& gpu) {
    for (const auto& m : gpu["host"]["ttm_modules"])
      if (m["module"] == "ttm") return m;
    return json();
  };
  std::string unset;
  std::ifstream("/sys/module/ttm/parameters/pages_limit") >> unset;
  json before = json::parse(runProgram({kTally, "gpu", "--json"}).out, nullptr, false);
  std::ofstream("/sys/module/ttm/parameters/pages_limit") << "1048576";
  json after = json::parse(runProgram({kTally, "gpu", "--json"}).out, nullptr, false);
  auto d = runProgram({kTally, "doctor", "--json"});
  shell("rmmod ttm");

  EXPECT_EQ(unset, "0") << "this kernel sets pages_limit with no TTM device";
  json t0 = ttmEntry(before);
  ASSERT_TRUE(t0.is_object()) << before.dump(2);
  EXPECT_FALSE(t0.contains("pages_limit_pages")) << t0.dump();
  EXPECT_NE(t0["pages_limit_unknown"].get<std::string>().find("reads 0"), std::string::npos);
  json t1 = ttmEntry(after);
  EXPECT_EQ(t1["pages_limit_pages"], 1048576u) << t1.dump();
  EXPECT_EQ(t1["pages_limit_bytes"], 1048576u * static_cast<std::uint64_t>(::getpagesize()));

  json doctor = json::parse(d.out, nullptr, false);
  ASSERT_TRUE(doctor.is_object()) << d.err;
  json sign;
  for (const auto& s : doctor["gtt_memcg_coverage"]["static_signs"])
    if (s["name"] == "ttm.ttm_memcg") sign = s;
  ASSERT_TRUE(sign.is_object()) << doctor["gtt_memcg_coverage"].dump(2);
  EXPECT_EQ(sign["present"], false);
  EXPECT_NE(sign["evidence"].get<std::string>().find("has no ttm_memcg option"), std::string::npos)
      << sign.dump();
}

}  // namespace
}  // namespace tally
