// The lease runner on this machine's real processes, with the cgroup side
// behind the LeaseCgroup seam: a fake that records what the runner asked for
// and serves memory files from a fixture tree. The real systemd and cgroupfs
// implementations run in the VM system tests (tests/vm).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "contain/held_child.h"
#include "contain/lease_cgroup.h"
#include "fs/root.h"
#include "probes/proc_cgroup.h"
#include "run/runner.h"
#include "support/fake_host.h"

namespace tally {
namespace {

using namespace tally::testing;
using namespace std::chrono_literals;

// The held child is gone (killed and reaped) when no child of this test is
// left: it can never exec afterwards, so "never ran" is proven now, not
// after a wait.
bool noChildLeft() {
  errno = 0;
  return ::waitpid(-1, nullptr, WNOHANG) == -1 && errno == ECHILD;
}

bool exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

class FakeLease final : public contain::LeaseCgroup {
 public:
  FakeLease(const std::string& tree, std::string memoryMax, std::string events)
      : tree_(tree), memoryMax_(std::move(memoryMax)), events_(std::move(events)) {}
  const char* manager() const override { return "fake"; }
  std::string unitName() const override { return "fake.scope"; }
  std::string sliceName() const override { return "fake.slice"; }
  Status place(pid_t pid) override {
    calls += "place ";
    pid_ = pid;
    if (placeError) return Error{0, *placeError};
    // The "lease cgroup" is where the child really is, so the membership
    // read-back against the live /proc holds; its files come from the tree.
    auto text = readFile("/proc/" + std::to_string(pid) + "/cgroup");
    cgroup_ = probes::parseProcCgroup(text)->path;
    std::string dir = tree_ + cgroup_;
    writeFile(dir + "/memory.max", memoryMax_ + "\n");
    writeFile(dir + "/memory.high", "max\n");
    writeFile(dir + "/memory.swap.max", "max\n");
    writeFile(dir + "/memory.oom.group", "1\n");
    writeFile(dir + "/memory.current", "12345\n");
    writeFile(dir + "/memory.stat", "anon 10000\nfile 2345\npgfault 77\n");
    writeFile(dir + "/memory.peak", "20000\n");
    writeFile(dir + "/memory.events", events_);
    writeFile(dir + "/cgroup.procs", std::to_string(pid) + "\n");
    return Ok{};
  }
  const std::string& cgroup() const override { return cgroup_; }
  const std::string& countersCgroup() const override { return cgroup_; }
  std::string delegationHint() const override { return ""; }
  Status stop() override {
    calls += "stop ";
    ::kill(pid_, SIGTERM);
    return Ok{};
  }
  Status killAll() override {
    calls += "kill ";
    ::kill(pid_, SIGKILL);
    return Ok{};
  }
  Status endWorkload() override {
    calls += "end ";
    return Ok{};
  }
  Status release() override {
    calls += "release";
    return Ok{};
  }
  std::string calls;
  std::optional<std::string> placeError;

 private:
  std::string tree_, memoryMax_, events_;
  std::string cgroup_;
  pid_t pid_ = 0;
};

// A signal blocked in this thread (and threads it starts) and read through a
// signalfd, as tally run does with its stop signals.
struct BlockedSignal {
  sigset_t set{};
  int fd = -1;
  explicit BlockedSignal(int sig) {
    sigemptyset(&set);
    sigaddset(&set, sig);
    ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
    fd = ::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  }
  ~BlockedSignal() {
    ::close(fd);
    ::pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  }
};

struct Runner : ::testing::Test {
  TempDir tree;
  fs::Root proc = *fs::Root::open("/proc");
  fs::Root sys = *fs::Root::open("/sys");
  fs::Root cg = *fs::Root::open(tree.path());
  lease::LeaseSpec spec;
  void SetUp() override {
    spec.id = "test";
    spec.declaration.name = "t";
    spec.sampleIntervalUs = 20'000;
  }
  std::vector<std::string> startLines;  // the start lines said, in order
  lease::LeaseRecord run(FakeLease& lease, int signalFd = -1) {
    run::RunEnv env{proc, sys, &cg, signalFd, 4096, nullptr, [this](const lease::LeaseRecord& r) {
                      startLines.push_back(lease::startLine(r));
                    }};
    return run::runLease(spec, env, &lease, "");
  }
};

TEST_F(Runner, ExitCodeMirrorsAndEveryStepRuns) {
  spec.command = {"sh", "-c", "exit 5"};
  FakeLease lease(tree.path(), "max", "oom 0\noom_kill 0\n");
  auto r = run(lease);
  EXPECT_EQ(r.outcome.cls, lease::OutcomeClass::Exited);
  EXPECT_EQ(r.outcome.exitStatus, 5);
  EXPECT_EQ(lease.calls, "place end release");
  ASSERT_TRUE(r.applied);
  EXPECT_TRUE(r.applied->memoryMax.unlimited);
  EXPECT_EQ(r.counters.memoryPeak, 20000u);
  EXPECT_EQ(r.host.peakCurrent, 12345u);
  EXPECT_EQ(r.host.statAtPeak->get("anon"), 10000u);
  EXPECT_EQ(r.counters.stat->get("pgfault"), 77u);
  EXPECT_GE(r.gpu.samples, 1u);
  EXPECT_EQ(r.gpu.peakBytes, 0u) << "a measured zero: the scan ran and found no DRM client";
  EXPECT_EQ(r.manager, "fake");
  EXPECT_EQ(r.unit, "fake.scope");
  EXPECT_EQ(startLines,
            std::vector<std::string>{"tally: lease test running as fake.scope (no limits "
                                     "declared)"});
}

// The start line is said once the lease is verified and before the workload
// is released (a workload that writes at once never comes first), with the
// limits it runs under; never for a lease whose containment was refused.
TEST_F(Runner, TheStartLineComesBeforeTheWorkloadWithItsLimits) {
  std::string marker = tree.path() + "/ran";
  spec.command = {"touch", marker};
  spec.declaration.gpuMemoryMax = 40ULL << 30;
  FakeLease lease(tree.path(), "max", "oom 0\noom_kill 0\n");
  bool ranBefore = true;
  run::RunEnv env{proc, sys, &cg, -1, 4096, nullptr, [&](const lease::LeaseRecord& r) {
                    ranBefore = exists(marker);
                    startLines.push_back(lease::startLine(r));
                  }};
  auto r = run::runLease(spec, env, &lease, "");
  EXPECT_EQ(r.outcome.cls, lease::OutcomeClass::Exited);
  EXPECT_FALSE(ranBefore) << "the workload ran before the start line";
  EXPECT_TRUE(exists(marker));
  EXPECT_EQ(startLines, std::vector<std::string>{
                            "tally: lease test running as fake.scope (gpu_memory_max=40.0 GiB)"});
  spec.declaration.memoryMax = 64 << 20;
  FakeLease refused(tree.path(), "max", "");  // reads back "max": refused
  startLines.clear();
  run(refused);
  EXPECT_TRUE(startLines.empty());
}

TEST_F(Runner, ReadBackMismatchKillsTheHeldChildBeforeExec) {
  std::string marker = tree.path() + "/ran";
  spec.command = {"touch", marker};
  spec.declaration.memoryMax = 64 << 20;
  FakeLease lease(tree.path(), "max", "");  // the cgroup says "max": not what was declared
  auto r = run(lease);
  EXPECT_EQ(r.outcome.cls, lease::OutcomeClass::ContainmentRefused);
  EXPECT_EQ(r.outcome.exitStatus, 125);
  EXPECT_NE(r.outcome.summary.find("memory.max is max, declared 67108864"), std::string::npos)
      << r.outcome.summary;
  EXPECT_EQ(lease.calls, "place release");
  EXPECT_TRUE(noChildLeft());
  EXPECT_FALSE(exists(marker)) << "the workload ran although containment was refused";
}

TEST_F(Runner, PlacementFailureNeverExecs) {
  std::string marker = tree.path() + "/ran";
  spec.command = {"touch", marker};
  FakeLease lease(tree.path(), "max", "");
  lease.placeError = "Unit tally-test.scope already exists";
  auto r = run(lease);
  EXPECT_EQ(r.outcome.cls, lease::OutcomeClass::ContainmentRefused);
  EXPECT_NE(r.outcome.summary.find("already exists"), std::string::npos);
  EXPECT_TRUE(noChildLeft());
  EXPECT_FALSE(exists(marker));
}

TEST_F(Runner, NoLeaseMeansNoFork) {
  spec.command = {"true"};
  run::RunEnv env{proc, sys, &cg, -1, 4096, nullptr, {}};
  auto r = run::runLease(spec, env, nullptr,
                         "no systemd (PID 1 is x); memory controller is on cgroup v1");
  EXPECT_EQ(r.outcome.cls, lease::OutcomeClass::ContainmentRefused);
  EXPECT_EQ(r.manager, "none");
  EXPECT_EQ(r.outcome.summary,
            "the workload never ran: no systemd (PID 1 is x); memory controller is on cgroup v1");
}

TEST_F(Runner, CommandNotFound) {
  spec.command = {"/nonexistent/tally-test-command"};
  FakeLease lease(tree.path(), "max", "oom_kill 0\n");
  auto r = run(lease);
  EXPECT_EQ(r.outcome.cls, lease::OutcomeClass::ExecFailed);
  EXPECT_EQ(r.outcome.exitStatus, 127);
  EXPECT_EQ(lease.calls, "place end release");
}

TEST_F(Runner, SigkillWithOomKillInTheCountersIsAnOom) {
  spec.command = {"sh", "-c", "kill -KILL $$"};
  spec.declaration.memoryMax = 64 << 20;
  FakeLease lease(tree.path(), "67108864", "oom 1\noom_kill 2\noom_group_kill 1\n");
  auto r = run(lease);
  EXPECT_EQ(r.outcome.cls, lease::OutcomeClass::OomKilled);
  EXPECT_EQ(r.outcome.exitStatus, 137);
  EXPECT_EQ(r.outcome.summary,
            "killed by the kernel OOM killer: cgroup memory.events oom_kill=2, MemoryMax=64.0 MiB");
}

TEST_F(Runner, StopSignalStopsTheLeaseAndIsNamed) {
  BlockedSignal term(SIGTERM);
  ASSERT_GE(term.fd, 0);
  std::string started = tree.path() + "/started";
  spec.command = {"sh", "-c", "touch " + started + "; exec sleep 30"};
  FakeLease lease(tree.path(), "max", "oom_kill 0\n");
  std::thread sender([&] {
    // The barrier: the workload itself says it runs.
    for (auto deadline = std::chrono::steady_clock::now() + 10s;
         !exists(started) && std::chrono::steady_clock::now() < deadline;) {
      std::this_thread::sleep_for(5ms);
    }
    ::kill(::getpid(), SIGTERM);
  });
  auto start = std::chrono::steady_clock::now();
  auto r = run(lease, term.fd);
  sender.join();
  // The workload sleeps 30 s: ending before that, it was the signal that ended it.
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
  EXPECT_EQ(r.outcome.cls, lease::OutcomeClass::Stopped);
  EXPECT_EQ(r.outcome.exitStatus, 143);
  EXPECT_EQ(lease.calls, "place stop end release");
}

TEST_F(Runner, StopRequestedDuringSetupMeansTheWorkloadNeverStarts) {
  BlockedSignal hup(SIGHUP);
  ASSERT_GE(hup.fd, 0);
  ::kill(::getpid(), SIGHUP);  // pending before the runner starts
  std::string marker = tree.path() + "/ran";
  spec.command = {"touch", marker};
  FakeLease lease(tree.path(), "max", "oom_kill 0\n");
  auto r = run(lease, hup.fd);
  EXPECT_EQ(r.outcome.cls, lease::OutcomeClass::ContainmentRefused);
  EXPECT_NE(r.outcome.summary.find("tally received SIGHUP before the workload started"),
            std::string::npos);
  EXPECT_EQ(lease.calls, "place release");
  EXPECT_TRUE(noChildLeft());
  EXPECT_FALSE(exists(marker));
}

TEST(HeldChild, AbandonedChildNeverExecs) {
  TempDir dir;
  std::string marker = dir.path() + "/ran";
  {
    auto child = contain::HeldChild::spawn({"touch", marker});
    ASSERT_TRUE(child);
    pid_t pid = child->pid();
    EXPECT_GT(pid, 0);
    child->abandon();
    EXPECT_NE(::kill(pid, 0), 0);
  }
  {
    auto child = contain::HeldChild::spawn({"touch", marker});
    ASSERT_TRUE(child);
  }  // destroyed unreleased: abandoned too
  EXPECT_TRUE(noChildLeft());
  EXPECT_FALSE(exists(marker));
  auto child = contain::HeldChild::spawn({"touch", marker});
  ASSERT_TRUE(child);
  EXPECT_EQ(child->release(), 0);
  auto status = child->reap();
  ASSERT_TRUE(status);
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
  EXPECT_TRUE(exists(marker));
}

TEST(HeldChild, ExecFailureComesBackAsErrno) {
  auto child = contain::HeldChild::spawn({"/nonexistent/x"});
  ASSERT_TRUE(child);
  EXPECT_EQ(child->release(), ENOENT);
  auto status = child->reap();
  ASSERT_TRUE(status);
  EXPECT_EQ(WEXITSTATUS(*status), 127);
  EXPECT_FALSE(contain::HeldChild::spawn({}));
}

}  // namespace
}  // namespace tally
