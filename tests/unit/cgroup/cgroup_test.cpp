// A cgroup held open: typed reads of the kernel's files, on a fixture tree
// shaped like cgroupfs, including one removed under the handle.
#include "cgroup/cgroup.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support/fake_host.h"

namespace tally {
namespace {

using namespace tally::testing;

struct CgroupDir : ::testing::Test {
  TempDir dir;
  std::string path = "/system.slice/llama.service";
  std::string abs() const { return dir.path() + path; }
  void SetUp() override {
    writeFile(abs() + "/memory.current", "104857600\n");
    writeFile(abs() + "/memory.peak", "209715200\n");
    writeFile(abs() + "/memory.max", "max\n");
    writeFile(abs() + "/memory.high", "1073741824\n");
    writeFile(abs() + "/memory.oom.group", "1\n");
    writeFile(abs() + "/memory.events",
              "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\noom_group_kill 0\n");
    writeFile(abs() + "/cgroup.events", "populated 1\nfrozen 0\n");
    writeFile(abs() + "/cgroup.procs", "17\n4242\n\nnot-a-pid\n");
    writeFile(abs() + "/cgroup.controllers", "cpu io memory pids\n");
    writeFile(abs() + "/cgroup.subtree_control", "memory\n");
    writeFile(abs() + "/cgroup.kill", "");
  }
  cgroup::Cgroup open() {
    root.emplace(std::move(*fs::Root::open(dir.path())));
    auto cg = cgroup::Cgroup::open(*root, path);
    EXPECT_TRUE(cg) << cg.error().message;
    return std::move(*cg);
  }
  std::optional<fs::Root> root;
};

TEST_F(CgroupDir, TypedReadsGiveTheKernelsFigures) {
  auto cg = open();
  EXPECT_EQ(cg.path(), path);
  struct stat st {};
  ASSERT_EQ(::stat(abs().c_str(), &st), 0);
  EXPECT_EQ(cg.inode(), st.st_ino);
  EXPECT_EQ(*cg.memoryCurrent(), 104857600u);
  EXPECT_EQ(*cg.memoryPeak(), 209715200u);
  EXPECT_TRUE(cg.memoryMax()->unlimited);
  EXPECT_EQ(cg.memoryHigh()->bytes, 1073741824u);
  EXPECT_TRUE(*cg.oomGroup());
  EXPECT_EQ(cg.memoryEvents()->get("oom_kill"), 1u);
  EXPECT_TRUE(*cg.populated());
  EXPECT_EQ(*cg.procs(), (std::vector<pid_t>{17, 4242}));  // a line that is no pid is skipped
  EXPECT_TRUE(*cg.hasController("memory"));
  EXPECT_FALSE(*cg.hasController("dmem"));
  EXPECT_TRUE(*cg.delegates("memory"));
  ASSERT_TRUE(cg.kill());
  EXPECT_EQ(readFile(abs() + "/cgroup.kill"), "1");
  ASSERT_TRUE(cg.setMemoryMax(std::uint64_t{8} << 30));
  EXPECT_EQ(readFile(abs() + "/memory.max"), "8589934592");
}

TEST_F(CgroupDir, GarbageIsAnErrorThatQuotesIt) {
  writeFile(abs() + "/memory.current", "lots\n");
  writeFile(abs() + "/memory.oom.group", "2\n");
  writeFile(abs() + "/cgroup.events", "frozen 0\n");
  auto cg = open();
  EXPECT_NE(cg.memoryCurrent().error().message.find("memory.current reads 'lots'"),
            std::string::npos);
  EXPECT_FALSE(cg.oomGroup());
  EXPECT_NE(cg.populated().error().message.find("no 'populated' line"), std::string::npos);
}

// The handle is the directory, not its name: removed and re-created under
// the same name, the new one is not read as the old.
TEST_F(CgroupDir, ARemovedCgroupIsEmptyAndItsCountersSaySo) {
  auto cg = open();
  ASSERT_EQ(std::system(("rm -rf " + abs()).c_str()), 0);
  writeFile(abs() + "/cgroup.events", "populated 1\n");  // a new cgroup of the same name
  EXPECT_FALSE(*cg.populated());
  EXPECT_TRUE(cg.procs()->empty());
  auto counters = cgroup::readFinalCounters(cg);
  EXPECT_FALSE(counters.memoryPeak);
  EXPECT_NE(counters.memoryPeakUnknown->find("removed before its counters were read"),
            std::string::npos)
      << *counters.memoryPeakUnknown;
}

// A set torn by the cgroup's removal keeps what it read and takes only what
// it lacks from the earlier, whole read; a whole set takes nothing.
TEST(FinalCounters, APartReadSetIsFilledFromTheEarlierWholeOneAndSaysWhich) {
  cgroup::FinalCounters earlier;
  earlier.memoryPeak = 300;
  earlier.swapPeak = 7;
  earlier.events = probes::parseFlatKeyed("oom 1\noom_kill 1\n").value();
  earlier.stat = probes::parseFlatKeyed("anon 5\n").value();
  cgroup::FinalCounters torn;
  torn.events = probes::parseFlatKeyed("oom 2\noom_kill 2\n").value();
  torn.memoryPeakUnknown = "gone";
  auto filled = cgroup::fillUnread(torn, earlier);
  EXPECT_EQ(filled, (std::vector<std::string>{"memory.peak", "memory.swap.peak", "memory.stat"}));
  EXPECT_EQ(torn.memoryPeak, 300u);
  EXPECT_FALSE(torn.memoryPeakUnknown);
  EXPECT_EQ(torn.events->get("oom_kill"), 2u) << "its own read is newer: kept";
  cgroup::FinalCounters whole = earlier;
  EXPECT_TRUE(cgroup::fillUnread(whole, cgroup::FinalCounters{}).empty());
  EXPECT_TRUE(cgroup::fillUnread(whole, earlier).empty());
  EXPECT_EQ(whole.memoryPeak, 300u);
}

TEST_F(CgroupDir, NoSymlinkIsFollowedToReachOne) {
  ASSERT_EQ(::symlink((dir.path() + "/system.slice").c_str(), (dir.path() + "/alias").c_str()), 0);
  root.emplace(std::move(*fs::Root::open(dir.path())));
  auto cg = cgroup::Cgroup::open(*root, "/alias/llama.service");
  ASSERT_FALSE(cg);
  EXPECT_NE(cg.error().message.find("symlink"), std::string::npos) << cg.error().message;
  EXPECT_FALSE(cgroup::Cgroup::open(*root, "/system.slice/../../etc"));
}

}  // namespace
}  // namespace tally
