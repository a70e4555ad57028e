// A lease is metered through the cgroup it holds, never by its path: on the
// real cgroupfs, a cgroup removed and made again under the same name is
// another cgroup, and the lease's meter sees its own as gone instead of
// metering the newcomer. Process A (16 MiB of GTT through the test DRM
// driver) runs in the cgroup; the meter holds it; A exits, the cgroup is
// removed and made again, process B (32 MiB) runs in the new one. VM harness
// only (real cgroup v2, the driver).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "cgroup/cgroup.h"
#include "lease/meter.h"
#include "scanner/scan.h"
#include "support/fake_host.h"
#include "support/raw_client.h"

namespace tally {
namespace {

using namespace tally::testing;

const std::string kWorkload = TALLY_VM_WORKLOAD;
constexpr const char* kPath = "/vm-recreated.scope";
const std::string kDir = "/tmp/vm-cgroup-handle";

// The workload holding MIB of GTT, moved into the cgroup before it execs
// (it blocks on a pipe until then); returns once it holds its buffer (READY).
pid_t holder(unsigned mib, const std::string& tag) {
  std::string ready = kDir + "/" + tag + ".ready";
  int go[2];
  if (::pipe(go) != 0) return -1;
  pid_t p = ::fork();
  if (p == 0) {
    ::close(go[1]);
    char c;
    if (::read(go[0], &c, 1) != 1) ::_exit(126);
    std::string m = std::to_string(mib);
    ::execl(kWorkload.c_str(), kWorkload.c_str(), "gpu", "gtt", m.c_str(), "1", "60000",
            ready.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(go[0]);
  writeFile(fmt::format("/sys/fs/cgroup{}/cgroup.procs", kPath), std::to_string(p) + "\n");
  if (::write(go[1], "g", 1) != 1) ADD_FAILURE() << "cannot release the workload";
  ::close(go[1]);
  eventually([&] { return ::access(ready.c_str(), F_OK) == 0; }, std::chrono::seconds(30));
  return p;
}

TEST(VmCgroupHandle, ACgroupMadeAgainUnderTheSameNameIsGoneNeverTheOldLease) {
  ASSERT_NE(std::getenv("TALLY_IN_VM"), nullptr)
      << "this test needs the VM harness: vm/run.sh -- tally_vm_tests";
  const char* ko = std::getenv("TALLY_TESTDRM_KO");
  ASSERT_NE(ko, nullptr);
  if (::access("/sys/module/tally_testdrm", F_OK) != 0) {
    ASSERT_EQ(std::system(("modprobe drm && insmod " + std::string(ko)).c_str()), 0);
  }
  ASSERT_EQ(std::system(("rm -rf " + kDir).c_str()), 0);
  makeDirs(kDir);
  const std::string dir = fmt::format("/sys/fs/cgroup{}", kPath);
  ::rmdir(dir.c_str());
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  auto proc = fs::Root::open("/proc");
  auto sys = fs::Root::open("/sys");
  auto root = fs::Root::open("/sys/fs/cgroup");
  ASSERT_TRUE(proc && sys && root);

  pid_t a = holder(16, "a");
  auto held = cgroup::Cgroup::open(*root, kPath);
  ASSERT_TRUE(held) << held.error().message;
  lease::LeaseMeter meter(*proc, *sys, *held, std::nullopt);
  meter.sample();
  EXPECT_EQ(meter.gpu().lastBytes, 16u << 20) << meter.gpu().lastError.value_or("");

  ::kill(a, SIGKILL);
  ASSERT_EQ(::waitpid(a, nullptr, 0), a);
  eventually([&] { return ::rmdir(dir.c_str()) == 0; }, std::chrono::seconds(10));
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0) << "the same name, made again";
  pid_t b = holder(32, "b");

  meter.sample();
  EXPECT_FALSE(meter.gpu().lastBytes) << "the new cgroup's 32 MiB must never be the lease's";
  ASSERT_TRUE(meter.gpu().lastError);
  EXPECT_NE(meter.gpu().lastError->find("is gone"), std::string::npos) << *meter.gpu().lastError;
  EXPECT_EQ(meter.gpu().peakBytes, 16u << 20);
  auto populated = held->populated();
  ASSERT_TRUE(populated);
  EXPECT_FALSE(*populated) << "the held cgroup is empty: the lease's end";
  // A scan by name finds the newcomer: it is another cgroup, not the lease.
  scanner::Scanner byName(*proc, *sys);
  auto fresh = byName.scanCgroup(*root, kPath);
  ASSERT_TRUE(fresh) << fresh.error().message;
  ASSERT_EQ(fresh->processes.size(), 1u);
  EXPECT_EQ(fresh->processes[0].pid, b);

  ::kill(b, SIGKILL);
  ::waitpid(b, nullptr, 0);
  eventually([&] { return ::rmdir(dir.c_str()) == 0; }, std::chrono::seconds(10));
}

}  // namespace
}  // namespace tally
