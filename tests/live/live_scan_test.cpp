// The scanner over the real /proc of this machine. There is no GPU here, so
// the test's children hold a char device (a private 1:7 node) that a fixture
// sysfs declares to be /dev/kfd: the live fd walk, fstatat, status/stat/cgroup
// reads and the KFD path all run against real kernel files and real PIDs.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

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
  // The parent's side of a child that writes a byte to `ready` once it holds
  // the node: waited for, and the child kept to be killed at TearDown.
  pid_t awaitReady(pid_t pid, int (&ready)[2]) {
    EXPECT_GT(pid, 0);
    ::close(ready[1]);
    char c;
    EXPECT_EQ(::read(ready[0], &c, 1), 1);
    ::close(ready[0]);
    children.push_back(pid);
    return pid;
  }
  // A child that opens the node, reports readiness, and sleeps until killed.
  pid_t spawnHolder(int flags = 0) {
    int ready[2];
    EXPECT_EQ(::pipe(ready), 0);
    pid_t pid = static_cast<pid_t>(
        ::syscall(SYS_clone, flags | SIGCHLD, nullptr, nullptr, nullptr, nullptr));
    if (pid == 0) {
      ::close(ready[0]);
      int fd = ::open(node.c_str(), O_RDONLY);
      if (fd < 0 || ::write(ready[1], "x", 1) != 1) ::_exit(1);
      for (;;) ::pause();
    }
    return awaitReady(pid, ready);
  }
  // A child whose second thread opens the node, in a table of its own
  // (`unshare`: unshare(CLONE_FILES) first) or in the process's shared one.
  pid_t spawnThreadHolder(bool unshare) {
    int ready[2];
    EXPECT_EQ(::pipe(ready), 0);
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(ready[0]);
      struct Args {
        const char* node;
        int ready;
        bool unshare;
      } args{node.c_str(), ready[1], unshare};
      pthread_t t;
      auto body = [](void* a) -> void* {
        auto* g = static_cast<Args*>(a);
        if (g->unshare && ::unshare(CLONE_FILES) != 0) ::_exit(2);
        int fd = ::open(g->node, O_RDONLY);
        if (fd < 0 || ::write(g->ready, "x", 1) != 1) ::_exit(1);
        for (;;) ::pause();
      };
      if (::pthread_create(&t, nullptr, body, &args) != 0) ::_exit(3);
      for (;;) ::pause();
    }
    return awaitReady(pid, ready);
  }
  Result<Scan> scan(ScanStats* stats = nullptr) {
    auto proc = fs::Root::open("/proc");
    auto sys = fs::Root::open(dir.path() + "/sys");
    EXPECT_TRUE(proc && sys);
    Scanner scanner(*proc, *sys);
    auto s = scanner.scanHost();
    if (stats) *stats = scanner.stats();
    return s;
  }
  static const Process* find(const Scan& s, pid_t pid) {
    for (const auto& p : s.processes)
      if (p.pid == pid) return &p;
    return nullptr;
  }
};

// A thread that unshared its fd table holds a device /proc/<pid>/fd never
// lists: the scanner walks that thread's table (kcmp says it is its own);
// a thread that opened it in the shared table is seen through the leader's.
TEST_F(LiveScan, AThreadWithItsOwnFdTableCannotHideItsDevice) {
  pid_t hider = spawnThreadHolder(true);
  pid_t sharer = spawnThreadHolder(false);
  ScanStats stats;
  auto s = scan(&stats);
  ASSERT_TRUE(s) << s.error().message;
  const Process* h = find(*s, hider);
  ASSERT_NE(h, nullptr) << "the device opened in the thread's own table is seen";
  EXPECT_TRUE(h->holdsKfd);
  const Process* sh = find(*s, sharer);
  ASSERT_NE(sh, nullptr);
  EXPECT_TRUE(sh->holdsKfd);
  // At least the hider's; where kcmp is refused (another container's init,
  // here) a thread's table is walked too rather than trusted to be shared.
  EXPECT_GE(stats.threadTables, 1u);
}

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
  const Process* pa = find(*s, a);
  const Process* pb = find(*s, b);
  ASSERT_TRUE(pa && pb);
  ASSERT_EQ(pa->kfdVram.size(), 1u);
  EXPECT_EQ(pa->kfdVram[0].bytes, 4096u);
  EXPECT_TRUE(pb->kfdVram.empty());
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

// The race made certain, not hoped for: the scanner's hook kills and reaps
// half the leavers after /proc was listed (their fd directory is gone) and
// the other half after their fds were walked (their stat is gone). Each is
// dropped whole and counted as vanished, none is "unreadable", and every
// process that stays is still read in full.
TEST_F(LiveScan, ProcessesExitingMidScanAreDroppedQuietly) {
  constexpr std::size_t kLeavers = 16, kStayers = 16;
  std::vector<pid_t> early, late, stayers;
  for (std::size_t i = 0; i < kLeavers; ++i) (i % 2 ? late : early).push_back(spawnHolder());
  for (std::size_t i = 0; i < kStayers; ++i) stayers.push_back(spawnHolder());
  auto endNow = [&](pid_t pid) {
    ASSERT_EQ(::kill(pid, SIGKILL), 0);
    ASSERT_EQ(::waitpid(pid, nullptr, 0), pid);  // reaped: /proc/<pid> is gone
    children.erase(std::find(children.begin(), children.end(), pid));
  };
  auto proc = fs::Root::open("/proc");
  auto sys = fs::Root::open(dir.path() + "/sys");
  ASSERT_TRUE(proc && sys);
  Scanner scanner(*proc, *sys);
  std::size_t endedAfterListing = 0, endedAfterWalk = 0;
  scanner.setHookForTests([&](ScanPoint at, pid_t pid) {
    if (at == ScanPoint::Listed) {
      for (pid_t p : early) endNow(p);
      endedAfterListing = early.size();
    } else if (std::find(late.begin(), late.end(), pid) != late.end()) {
      endNow(pid);
      ++endedAfterWalk;
    }
  });
  auto s = scanner.scanHost();
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(endedAfterListing, early.size());
  EXPECT_EQ(endedAfterWalk, late.size());  // every late leaver was walked, then ended
  // Other processes on the host may exit during the scan too: at least ours.
  EXPECT_GE(scanner.stats().pidsVanished, kLeavers);
  for (const auto& group : {early, late}) {
    for (pid_t gone : group) {
      EXPECT_EQ(find(*s, gone), nullptr) << gone;
      for (const auto& u : s->unreadable)
        EXPECT_NE(u.pid, gone) << "an exit reported as unreadable: " << u.reason;
    }
  }
  for (pid_t st : stayers) {
    const Process* p = find(*s, st);
    ASSERT_NE(p, nullptr) << "stayer " << st;
    EXPECT_TRUE(p->holdsKfd);
    EXPECT_GT(p->startTimeTicks, 0u);  // never a half-read process
    EXPECT_TRUE(p->comm.has_value());
  }
}

}  // namespace
}  // namespace tally::scanner
