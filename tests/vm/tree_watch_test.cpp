// A lease's tree followed by inotify on the real cgroupfs (cgroup/tree_watch.h):
// the kernel's own notices (kernfs_notify on cgroup.events, fsnotify on mkdir
// and rmdir) are what keep the index true, so they are tested where they
// happen. 500 empty cgroups cost one walk, then none; a process moved into one
// is found once the kernel's notice arrives; its exit puts the walk back to
// the top alone. VM harness only (real cgroup v2).
#include "cgroup/tree_watch.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>

#include "cgroup/cgroup.h"
#include "support/fake_host.h"
#include "support/process.h"
#include "support/raw_client.h"

namespace tally {
namespace {

using namespace tally::testing;
using namespace std::chrono_literals;

const std::string kTop = "/sys/fs/cgroup/vm-tree-watch.slice";

void removeTree() {
  // Deepest first: rmdir needs a cgroup without children.
  shell("[ -d " + kTop + " ] && find " + kTop + " -depth -type d -exec rmdir {} + 2>/dev/null");
}

struct Walked {
  std::vector<cgroup::SubtreeProc> procs;
  std::size_t visited = 0;
};

Walked walkOnce(cgroup::TreeWatcher& watcher, cgroup::SubtreeIndex& index) {
  watcher.drain();
  cgroup::SubtreeWalk walk;
  auto procs = index.procs({}, &walk);
  EXPECT_TRUE(procs) << procs.error().message;
  return {procs ? *procs : std::vector<cgroup::SubtreeProc>{}, walk.visited};
}

bool holds(const Walked& w, pid_t pid, const std::string& cgroup) {
  return std::any_of(w.procs.begin(), w.procs.end(),
                     [&](const auto& p) { return p.pid == pid && p.cgroup == cgroup; });
}

TEST(VmCgroupHandle, AFollowedTreeIsReadWhereSomethingRunsAndTheKernelsNoticesKeepItTrue) {
  ASSERT_NE(std::getenv("TALLY_IN_VM"), nullptr)
      << "this test needs the VM harness: vm/run.sh -- tally_vm_tests";
  removeTree();
  ASSERT_EQ(::mkdir(kTop.c_str(), 0755), 0);
  for (int i = 0; i < 500; ++i) {
    char name[16];
    std::snprintf(name, sizeof name, "/c%03d", i);
    ASSERT_EQ(::mkdir((kTop + name).c_str(), 0755), 0) << name;
  }
  auto root = fs::Root::open("/sys/fs/cgroup");
  ASSERT_TRUE(root);
  auto cg = cgroup::Cgroup::open(*root, "/vm-tree-watch.slice");
  ASSERT_TRUE(cg) << cg.error().message;
  auto w = cgroup::TreeWatcher::open(100'000);
  ASSERT_TRUE(w) << w.error().message;
  cgroup::TreeWatcher& watcher = **w;
  {
    cgroup::SubtreeIndex index(watcher, *cg);
    // The first walk sees every cgroup once; nothing runs anywhere, so the
    // next opens the top alone.
    Walked first = walkOnce(watcher, index);
    EXPECT_TRUE(first.procs.empty());
    EXPECT_EQ(first.visited, 501u);
    EXPECT_EQ(index.indexed(), 501u);
    EXPECT_EQ(walkOnce(watcher, index).visited, 1u) << "the top is empty: its subtree is too";
    // A process in c321: every cgroup on its way is populated now, and the
    // first walk after the kernel's notice reads them.
    int go[2];
    ASSERT_EQ(::pipe(go), 0);
    pid_t child = ::fork();
    if (child == 0) {
      ::close(go[1]);
      char c;
      (void)!::read(go[0], &c, 1);  // blocks until the test ends it
      ::_exit(0);
    }
    ::close(go[0]);
    writeFile(kTop + "/c321/cgroup.procs", std::to_string(child) + "\n");
    Walked now;
    // A barrier on the kernel's notice (sent from a workqueue), not a speed.
    EXPECT_TRUE(eventually(
        [&] {
          now = walkOnce(watcher, index);
          return holds(now, child, "/vm-tree-watch.slice/c321");
        },
        20s));
    now = walkOnce(watcher, index);
    EXPECT_TRUE(holds(now, child, "/vm-tree-watch.slice/c321"));
    EXPECT_EQ(now.visited, 2u) << "the top and c321; the 499 empty children are not opened";

    // mkdir below it is queued before mkdir returns; the move's notice follows.
    ASSERT_EQ(::mkdir((kTop + "/c321/inner").c_str(), 0755), 0);
    writeFile(kTop + "/c321/inner/cgroup.procs", std::to_string(child) + "\n");
    EXPECT_TRUE(eventually(
        [&] {
          now = walkOnce(watcher, index);
          return holds(now, child, "/vm-tree-watch.slice/c321/inner");
        },
        20s));
    now = walkOnce(watcher, index);
    EXPECT_EQ(now.visited, 3u);

    // It exits: once the notices arrive, the walk is the top alone again.
    ::close(go[1]);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(eventually([&] { return walkOnce(watcher, index).visited == 1; }, 20s));
    EXPECT_TRUE(walkOnce(watcher, index).procs.empty());

    // rmdir: forgotten, its watches given back.
    const std::size_t before = watcher.watches();
    ASSERT_EQ(::rmdir((kTop + "/c321/inner").c_str()), 0);
    ASSERT_EQ(::rmdir((kTop + "/c000").c_str()), 0);
    walkOnce(watcher, index);
    EXPECT_EQ(watcher.watches(), before - 4);
    EXPECT_EQ(index.wholeWalks(), 0u);
    EXPECT_FALSE(index.lastDrop()) << *index.lastDrop();
  }
  watcher.drain();
  EXPECT_EQ(watcher.watches(), 0u) << "an index gone gives every watch back";
  removeTree();
}

}  // namespace
}  // namespace tally
