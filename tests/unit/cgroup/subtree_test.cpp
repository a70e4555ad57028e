// The walk of a held cgroup's subtree (Cgroup::subtreeProcs): every process
// with the cgroup it is listed in, in name order, through the held directory;
// bounded in depth and breadth, iterative (a user's 1,500-level chain must
// not overflow the stack), and a cgroup removed under the handle is gone.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "cgroup/cgroup.h"
#include "support/fake_host.h"

namespace tally {
namespace {

using namespace tally::testing;

struct Subtree : ::testing::Test {
  TempDir dir;
  std::optional<fs::Root> root;
  cgroup::Cgroup open(const std::string& path) {
    root.emplace(std::move(*fs::Root::open(dir.path())));
    auto cg = cgroup::Cgroup::open(*root, path);
    EXPECT_TRUE(cg) << cg.error().message;
    return std::move(*cg);
  }
};

TEST_F(Subtree, EveryProcessWithItsCgroupInNameOrder) {
  writeFile(dir.path() + "/job/cgroup.procs", "10\n");
  writeFile(dir.path() + "/job/step_1/cgroup.procs", "11\n12\n");
  writeFile(dir.path() + "/job/step_0/cgroup.procs", "9\n");
  writeFile(dir.path() + "/job/step_0/task/cgroup.procs", "8\nnot-a-pid\n0\n");
  writeFile(dir.path() + "/job/notes", "a file, not a cgroup\n");
  auto cg = open("/job");
  auto procs = cg.subtreeProcs();
  ASSERT_TRUE(procs) << procs.error().message;
  std::vector<std::pair<pid_t, std::string>> got;
  for (const auto& p : *procs) got.emplace_back(p.pid, p.cgroup);
  EXPECT_EQ(got, (std::vector<std::pair<pid_t, std::string>>{{10, "/job"},
                                                             {9, "/job/step_0"},
                                                             {8, "/job/step_0/task"},
                                                             {11, "/job/step_1"},
                                                             {12, "/job/step_1"}}));
}

// A user may make her own cgroup 1,500 levels deep below a delegated one: the
// walk refuses it with the limit named, and never recurses (this test would
// need no more stack at 100,000 levels).
TEST_F(Subtree, AChainDeeperThanTheLimitIsRefusedNotRecursed) {
  std::string path = dir.path() + "/deep";
  ASSERT_EQ(::mkdir(path.c_str(), 0755), 0);
  writeFile(path + "/cgroup.procs", "1\n");
  ASSERT_EQ(::chdir(path.c_str()), 0);  // relative mkdirs: no PATH_MAX on the way down
  for (int i = 0; i < 1500; ++i) {
    ASSERT_EQ(::mkdir("c", 0755), 0) << i;
    ASSERT_EQ(::chdir("c"), 0);
  }
  ASSERT_EQ(::chdir("/"), 0);
  auto cg = open("/deep");
  auto procs = cg.subtreeProcs();
  ASSERT_FALSE(procs);
  EXPECT_EQ(procs.error().code, E2BIG);
  EXPECT_EQ(procs.error().message,
            "the cgroup tree under /deep is deeper than 64 levels; tally does not walk trees that "
            "deep");
  auto fine = cg.subtreeProcs({2000, 16'384});
  ASSERT_TRUE(fine) << fine.error().message;
  EXPECT_EQ(fine->size(), 1u);
}

TEST_F(Subtree, ATreeWiderThanTheLimitIsRefusedBeforeItIsWalked) {
  for (int i = 0; i < 3000; ++i)
    ASSERT_EQ(::mkdir((dir.path() + "/c" + std::to_string(i)).c_str(), 0755), 0);
  writeFile(dir.path() + "/cgroup.procs", "");
  auto cg = open("/");
  auto all = cg.subtreeProcs();
  ASSERT_TRUE(all) << all.error().message;  // 3,001 cgroups: within the default 16,384
  auto procs = cg.subtreeProcs({64, 1000});
  ASSERT_FALSE(procs);
  EXPECT_EQ(procs.error().code, E2BIG);
  EXPECT_EQ(procs.error().message,
            "the cgroup tree under / has more than 1000 cgroups; tally does not walk trees that "
            "large");
}

// Removed under the handle (rmdir of an empty cgroup): the cgroup is gone,
// and a directory made again under its name is never read as it.
TEST_F(Subtree, ACgroupRemovedUnderTheHandleIsGone) {
  std::string path = dir.path() + "/lease.scope";
  writeFile(path + "/cgroup.procs", "42\n");
  auto cg = open("/lease.scope");
  ASSERT_EQ(cg.subtreeProcs()->size(), 1u);
  ASSERT_EQ(::unlink((path + "/cgroup.procs").c_str()), 0);
  ASSERT_EQ(::rmdir(path.c_str()), 0);
  writeFile(path + "/cgroup.procs", "4242\n");  // another cgroup, the same name
  auto procs = cg.subtreeProcs();
  ASSERT_FALSE(procs);
  EXPECT_EQ(procs.error().code, ENOENT);
  EXPECT_EQ(procs.error().message,
            "cgroup /lease.scope is gone (removed; a cgroup made again under its name is another "
            "one)");
}

}  // namespace
}  // namespace tally
