// A reused pid on the real procfs is never metered as the old process: a PID
// namespace of our own (so the pid can be reused on purpose, through its
// ns_last_pid), its own procfs mount, and a meter's held handles across the
// reuse. Process A holds 16 MiB of GTT through the test DRM driver, exits;
// process B gets A's pid and holds 32 MiB. The held /proc/<pid> of A must fail
// and B be read, in the very next sample. VM harness only (the driver).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "gpumem/gpu_memory.h"
#include "gpumem/regions.h"
#include "scanner/scan.h"
#include "support/fake_host.h"
#include "support/raw_client.h"

namespace tally {
namespace {

using namespace tally::testing;

const std::string kWorkload = TALLY_VM_WORKLOAD;
const std::string kDir = "/tmp/vm-pid-reuse";

// In the namespace's init: what the meter saw, as "pid gtt_bytes" lines, or a reason.
struct Seen {
  std::size_t processes = 0;
  pid_t pid = 0;
  std::uint64_t gtt = 0;
};

Seen sampleOnce(const fs::Root& proc, const fs::Root& sys, const fs::Root& cg,
                scanner::ProcHandles& handles, std::string& why) {
  scanner::Scanner scanner(proc, sys);
  scanner.useHandles(&handles);
  auto scan = scanner.scanCgroup(cg, "/lease.scope");
  Seen s;
  if (!scan) {
    why = scan.error().message;
    return s;
  }
  s.processes = scan->processes.size();
  if (!scan->processes.empty()) s.pid = scan->processes[0].pid;
  for (const auto& c : scan->clients) {
    auto regions = gpumem::clientRegions(*scan, c).regions;
    if (auto it = regions.find("gtt"); it != regions.end() && it->second.resident.get())
      s.gtt += *it->second.resident.get();
  }
  return s;
}

// Starts the workload holding MIB of GTT as the namespace's pid 2; returns its pid.
pid_t holder(unsigned mib, const std::string& ready) {
  pid_t p = ::fork();
  if (p == 0) {
    std::string m = std::to_string(mib);
    ::execl(kWorkload.c_str(), kWorkload.c_str(), "gpu", "gtt", m.c_str(), "1", "60000",
            ready.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // The workload's READY file is the barrier: it holds its buffer now.
  eventually([&] { return ::access(ready.c_str(), F_OK) == 0; }, std::chrono::seconds(30));
  return p;
}

// The namespace's init. Exit status 0: all held; otherwise the failure is in RESULT.
int nsInit() {
  auto fail = [](const std::string& what) {
    writeFile(kDir + "/result", what + "\n");
    return 1;
  };
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    return fail("make / private");
  makeDirs(kDir + "/proc");
  if (::mount("proc", (kDir + "/proc").c_str(), "proc", 0, nullptr) != 0) return fail("mount proc");
  auto proc = fs::Root::open(kDir + "/proc");
  auto sys = fs::Root::open("/sys");
  makeDirs(kDir + "/cgroup/lease.scope");
  writeFile(kDir + "/cgroup/lease.scope/cgroup.procs", "2\n");
  auto cg = fs::Root::open(kDir + "/cgroup");
  if (!proc || !sys || !cg) return fail("open roots");
  scanner::ProcHandles handles;
  std::string why;

  pid_t a = holder(16, kDir + "/a.ready");
  if (a != 2) return fail("process A is pid " + std::to_string(a) + ", not 2");
  Seen first = sampleOnce(*proc, *sys, *cg, handles, why);
  if (first.processes != 1 || first.gtt != (16u << 20))
    return fail("A: " + std::to_string(first.processes) + " processes, gtt " +
                std::to_string(first.gtt) + " " + why);
  if (handles.held.size() != 1) return fail("A is not held");

  ::kill(a, SIGKILL);
  ::waitpid(a, nullptr, 0);
  // The next fork in this namespace gets pid 2 again.
  writeFile(kDir + "/proc/sys/kernel/ns_last_pid", "1");
  pid_t b = holder(32, kDir + "/b.ready");
  if (b != 2) return fail("process B is pid " + std::to_string(b) + ", not 2 (no reuse)");
  Seen second = sampleOnce(*proc, *sys, *cg, handles, why);
  ::kill(b, SIGKILL);
  ::waitpid(b, nullptr, 0);
  if (second.processes != 1 || second.pid != 2 || second.gtt != (32u << 20))
    return fail("after the reuse: " + std::to_string(second.processes) + " processes, gtt " +
                std::to_string(second.gtt) + " (32 MiB is B's; 16 MiB would be A's) " + why);
  writeFile(kDir + "/result", "ok\n");
  return 0;
}

TEST(VmProcHandles, AReusedPidOnProcfsIsReadAsTheNewProcessInTheNextSample) {
  ASSERT_NE(std::getenv("TALLY_IN_VM"), nullptr)
      << "this test needs the VM harness: vm/run.sh -- tally_vm_tests";
  const char* ko = std::getenv("TALLY_TESTDRM_KO");
  ASSERT_NE(ko, nullptr);
  if (::access("/sys/module/tally_testdrm", F_OK) != 0) {
    ASSERT_EQ(std::system(("modprobe drm && insmod " + std::string(ko)).c_str()), 0);
  }
  ASSERT_EQ(std::system(("rm -rf " + kDir).c_str()), 0);
  makeDirs(kDir);
  // A helper unshares, so this test process's later children stay in ours.
  pid_t helper = ::fork();
  if (helper == 0) {
    if (::unshare(CLONE_NEWPID) != 0) ::_exit(2);
    pid_t init = ::fork();  // pid 1 of the new namespace
    if (init == 0) {
      if (::unshare(CLONE_NEWNS) != 0) ::_exit(2);
      ::_exit(nsInit());
    }
    int st = 0;
    if (init < 0 || ::waitpid(init, &st, 0) != init) ::_exit(3);
    ::_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 4);
  }
  ASSERT_GT(helper, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(helper, &status, 0), helper);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << readFile(kDir + "/result");
  EXPECT_EQ(readFile(kDir + "/result"), "ok\n");
}

}  // namespace
}  // namespace tally
