// The scanner over the real /proc of this machine. There is no GPU here, so
// the test's children hold a char device (a private 1:7 node) that a fixture
// sysfs declares to be /dev/kfd: the live fd walk, fstatat, status/stat/cgroup
// reads and the KFD path all run against real kernel files and real PIDs.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "scanner/scan.h"
#include "support/fake_host.h"

namespace tally::scanner {
namespace {

using namespace tally::testing;

class LiveScan : public ::testing::Test {
 protected:
  TempDir dir;
  std::string node;
  std::vector<pid_t> children;

  void SetUp() override {
    node = dir.path() + "/fake-kfd";
    makeCharDevice(node, 1, 7);
    writeFile(dir.path() + "/sys/class/kfd/kfd/dev", "1:7\n");
  }
  void TearDown() override {
    for (pid_t c : children) {
      ::kill(c, SIGKILL);
      ::waitpid(c, nullptr, 0);
    }
  }
  // A child that opens the node, reports readiness, and sleeps until killed.
  pid_t spawnHolder(int flags = 0) {
    int ready[2];
    EXPECT_EQ(::pipe(ready), 0);
    pid_t pid = static_cast<pid_t>(::syscall(SYS_clone, flags | SIGCHLD, nullptr, nullptr, nullptr, nullptr));
    if (pid == 0) {
      ::close(ready[0]);
      int fd = ::open(node.c_str(), O_RDONLY);
      if (fd < 0 || ::write(ready[1], "x", 1) != 1) ::_exit(1);
      for (;;) ::pause();
    }
    EXPECT_GT(pid, 0);
    ::close(ready[1]);
    char c;
    EXPECT_EQ(::read(ready[0], &c, 1), 1);
    ::close(ready[0]);
    children.push_back(pid);
    return pid;
  }
  Result<Scan> scan() {
    auto proc = fs::Root::open("/proc");
    auto sys = fs::Root::open(dir.path() + "/sys");
    EXPECT_TRUE(proc && sys);
    Scanner scanner(*proc, *sys);
    return scanner.scanHost();
  }
  static const Process* find(const Scan& s, pid_t pid) {
    for (const auto& p : s.processes)
      if (p.pid == pid) return &p;
    return nullptr;
  }
};

TEST_F(LiveScan, SeesOwnChildren) {
  pid_t a = spawnHolder();
  pid_t b = spawnHolder();
  writeFile(dir.path() + "/sys/class/kfd/kfd/proc/" + std::to_string(a) + "/vram_7", "4096\n");
  auto s = scan();
  ASSERT_TRUE(s) << s.error().message;
  for (pid_t pid : {a, b}) {
    const Process* p = find(*s, pid);
    ASSERT_NE(p, nullptr) << pid;
    EXPECT_TRUE(p->holdsKfd);
    EXPECT_EQ(p->nspid, (std::vector<std::uint64_t>{static_cast<std::uint64_t>(pid)}));
    EXPECT_GT(p->startTimeTicks, 0u);
    EXPECT_TRUE(p->comm.has_value());
    EXPECT_TRUE(p->cgroup.has_value() || p->cgroupUnknownReason.has_value());
  }
  ASSERT_EQ(find(*s, a)->kfdVram.size(), 1u);
  EXPECT_EQ(find(*s, a)->kfdVram[0].bytes, 4096u);
  EXPECT_TRUE(find(*s, b)->kfdVram.empty());
  EXPECT_EQ(find(*s, ::getpid()), nullptr);  // the test process holds no such fd
}

TEST_F(LiveScan, ChildInNewPidNamespaceHasHostPidAndNspid) {
  ASSERT_EQ(::geteuid(), 0u) << "CLONE_NEWPID needs root; run the live suite as root (CI does)";
  pid_t pid = spawnHolder(CLONE_NEWPID);
  auto s = scan();
  ASSERT_TRUE(s) << s.error().message;
  const Process* p = find(*s, pid);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->pid, pid);  // reported under its host PID
  EXPECT_EQ(p->nspid, (std::vector<std::uint64_t>{static_cast<std::uint64_t>(pid), 1}));
}

TEST_F(LiveScan, ProcessesExitingMidScanAreDroppedQuietly) {
  // 32 "leavers" exit at staggered times (0..124 ms) while we scan, so scans
  // overlap exits; 32 "stayers" hold the node until every scan is done, so
  // each scan has known processes to find among the exiting ones.
  constexpr int kLeavers = 32, kStayers = 32;
  int go[2], done[2], ready[2];
  ASSERT_EQ(::pipe(go), 0);
  ASSERT_EQ(::pipe(done), 0);
  ASSERT_EQ(::pipe(ready), 0);
  std::vector<pid_t> leavers, stayers;
  for (int i = 0; i < kLeavers + kStayers; ++i) {
    const bool leaver = i < kLeavers;
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(go[1]);
      ::close(done[1]);
      ::close(ready[0]);
      int fd = ::open(node.c_str(), O_RDONLY);
      if (fd < 0 || ::write(ready[1], "x", 1) != 1) ::_exit(1);
      char c;
      (void)::read(leaver ? go[0] : done[0], &c, 1);  // EOF when the parent closes its end
      if (leaver) ::usleep(static_cast<useconds_t>(i * 4000));
      ::_exit(0);
    }
    (leaver ? leavers : stayers).push_back(pid);
  }
  // Wait until every child holds the node (a starved child would otherwise
  // open it only after the scans are over), then let the leavers go.
  ::close(ready[1]);
  char c;
  for (int n = 0; n < kLeavers + kStayers; ++n) ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::close(ready[0]);
  ::close(go[0]);
  ::close(go[1]);

  int leaversSeen = 0;
  for (int scans = 0; scans < 30; ++scans) {
    auto s = scan();
    ASSERT_TRUE(s) << s.error().message;
    for (const auto& u : s->unreadable) {
      for (pid_t r : leavers) EXPECT_NE(u.pid, r) << "exiting child reported unreadable: " << u.reason;
      for (pid_t r : stayers) EXPECT_NE(u.pid, r) << u.reason;
    }
    for (const auto& p : s->processes) {
      EXPECT_GT(p.startTimeTicks, 0u);  // never a half-read process
      EXPECT_TRUE(p.comm.has_value());
      leaversSeen += std::find(leavers.begin(), leavers.end(), p.pid) != leavers.end();
    }
    for (pid_t st : stayers) EXPECT_NE(find(*s, st), nullptr) << "stayer " << st << " missing in scan " << scans;
  }
  ::close(done[0]);
  ::close(done[1]);
  for (pid_t r : leavers) ::waitpid(r, nullptr, 0);
  for (pid_t r : stayers) ::waitpid(r, nullptr, 0);
  RecordProperty("leaver_sightings", leaversSeen);  // how much the scans overlapped exits
}

}  // namespace
}  // namespace tally::scanner
