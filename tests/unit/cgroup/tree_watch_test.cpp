// A lease's tree followed by inotify (cgroup/tree_watch.h): after the walk
// that indexes it, a walk opens only the cgroups where something runs and
// those made since; what changed is found at the next walk; a watch past the
// cap makes the walk whole, never wrong; trees that overlap share watches.
// On a plain directory tree (the kernel's cgroup.events is a file here, and
// writing it raises the IN_MODIFY kernfs_notify raises), with the real
// inotify.
#include "cgroup/tree_watch.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>

#include "cgroup/inotify_events.h"
#include "support/fake_host.h"

namespace tally {
namespace {

using namespace tally::testing;

void cgroupAt(const std::string& path, const std::string& procs, bool populated) {
  writeFile(path + "/cgroup.procs", procs);
  writeFile(path + "/cgroup.events", fmt::format("populated {}\nfrozen 0\n", populated ? 1 : 0));
}

struct TreeWatch : ::testing::Test {
  TempDir dir;
  std::optional<fs::Root> root;
  std::unique_ptr<cgroup::TreeWatcher> watcher;
  std::optional<cgroup::Cgroup> job;

  void SetUp() override {
    // The lease's cgroup, one busy child, 300 empty ones.
    cgroupAt(dir.path() + "/job", "10\n", true);
    cgroupAt(dir.path() + "/job/busy", "11\n", true);
    for (int i = 0; i < 300; ++i) cgroupAt(fmt::format("{}/job/e{:03}", dir.path(), i), "", false);
    root.emplace(std::move(*fs::Root::open(dir.path())));
    auto w = cgroup::TreeWatcher::open(100'000);
    ASSERT_TRUE(w) << w.error().message;
    watcher = std::move(*w);
    job.emplace(std::move(*cgroup::Cgroup::open(*root, "/job")));
  }
  std::vector<pid_t> pids(cgroup::SubtreeIndex& index, std::size_t* visited = nullptr,
                          const cgroup::SubtreeLimits& limits = {}) {
    watcher->drain();
    cgroup::SubtreeWalk walk;
    auto procs = index.procs(limits, &walk);
    EXPECT_TRUE(procs) << procs.error().message;
    if (visited) *visited = walk.visited;
    std::vector<pid_t> out;
    if (procs)
      for (const auto& p : *procs) out.push_back(p.pid);
    std::sort(out.begin(), out.end());
    return out;
  }
};

TEST_F(TreeWatch, AnEmptyCgroupIsOpenedOnceThenSkippedUntilSomethingRunsThere) {
  cgroup::SubtreeIndex index(*watcher, *job);
  std::size_t visited = 0;
  EXPECT_EQ(pids(index, &visited), (std::vector<pid_t>{10, 11}));
  EXPECT_EQ(visited, 302u) << "the first walk indexes every child of a populated cgroup";
  EXPECT_EQ(index.indexed(), 302u);
  EXPECT_EQ(pids(index, &visited), (std::vector<pid_t>{10, 11}));
  EXPECT_EQ(visited, 2u) << "then only where something runs";
  EXPECT_EQ(pids(index, &visited), (std::vector<pid_t>{10, 11}));
  EXPECT_EQ(visited, 2u);

  // A process enters e123: the kernel rewrites its cgroup.events.
  cgroupAt(dir.path() + "/job/e123", "12\n", true);
  EXPECT_EQ(pids(index, &visited), (std::vector<pid_t>{10, 11, 12}));
  EXPECT_EQ(visited, 3u);
  // ... and leaves.
  cgroupAt(dir.path() + "/job/e123", "", false);
  EXPECT_EQ(pids(index, &visited), (std::vector<pid_t>{10, 11}));
  EXPECT_EQ(visited, 3u) << "read once more, to learn it is empty";
  EXPECT_EQ(pids(index, &visited), (std::vector<pid_t>{10, 11}));
  EXPECT_EQ(visited, 2u);
  EXPECT_EQ(index.wholeWalks(), 0u);
  // The same processes as the whole walk lists.
  auto whole = job->subtreeProcs();
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole->size(), 2u);
}

TEST_F(TreeWatch, ACgroupMadeOrRemovedIsFoundAtTheNextWalk) {
  cgroup::SubtreeIndex index(*watcher, *job);
  std::size_t visited = 0;
  pids(index);
  EXPECT_EQ(watcher->watches(), 2 * 302u);
  // mkdir -p below the busy child: both levels found, the new processes read.
  cgroupAt(dir.path() + "/job/busy/step", "13\n", true);
  cgroupAt(dir.path() + "/job/busy/step/task", "14\n", true);
  EXPECT_EQ(pids(index, &visited), (std::vector<pid_t>{10, 11, 13, 14}));
  EXPECT_EQ(visited, 4u);
  // Made below an empty cgroup: seen once (the empty one, listed again, and
  // the new one), then the empty one once more to learn all below it is
  // quiet, then neither.
  cgroupAt(dir.path() + "/job/e007/idle", "", false);
  EXPECT_EQ(pids(index, &visited), (std::vector<pid_t>{10, 11, 13, 14}));
  EXPECT_EQ(visited, 6u);
  EXPECT_EQ(pids(index, &visited), (std::vector<pid_t>{10, 11, 13, 14}));
  EXPECT_EQ(visited, 5u);
  EXPECT_EQ(pids(index, &visited), (std::vector<pid_t>{10, 11, 13, 14}));
  EXPECT_EQ(visited, 4u);
  EXPECT_EQ(index.indexed(), 305u);
  EXPECT_EQ(watcher->watches(), 2 * 305u);
  // Removed: forgotten, its watches given back (at the next drain).
  std::filesystem::remove_all(dir.path() + "/job/busy/step");
  EXPECT_EQ(pids(index, &visited), (std::vector<pid_t>{10, 11}));
  EXPECT_EQ(visited, 2u);
  std::filesystem::remove_all(dir.path() + "/job/e001");
  pids(index);
  watcher->drain();
  EXPECT_EQ(index.indexed(), 302u);
  EXPECT_EQ(watcher->watches(), 2 * 302u);
}

// "populated 0" yet listed: a leader that exited while its threads moved on
// stays in cgroup.procs (the kernel lists a dying leader whose threads live),
// and the whole walk meters the process through it. So does the index: a
// cgroup is read when first seen and when it empties, and at every walk
// while it still lists someone.
TEST_F(TreeWatch, AnEmptiedCgroupThatStillListsALeaderIsReadUntilItListsNone) {
  cgroupAt(dir.path() + "/job/e050", "77\n", false);  // so before the index is made
  cgroup::SubtreeIndex index(*watcher, *job);
  std::size_t visited = 0;
  EXPECT_EQ(pids(index), (std::vector<pid_t>{10, 11, 77}));
  EXPECT_EQ(pids(index, &visited), (std::vector<pid_t>{10, 11, 77}));
  EXPECT_EQ(visited, 3u);
  // The busy child empties (its threads moved to e123) but still lists 11.
  cgroupAt(dir.path() + "/job/e123", "", true);
  cgroupAt(dir.path() + "/job/busy", "11\n", false);
  EXPECT_EQ(pids(index, &visited), (std::vector<pid_t>{10, 11, 77}));
  EXPECT_EQ(pids(index, &visited), (std::vector<pid_t>{10, 11, 77}));
  EXPECT_EQ(visited, 4u) << "the top, busy and e050 listing leaders, e123 running";
  // The leaders go: no notice (populated stays 0), yet the next walk lists
  // none and the one after opens neither.
  writeFile(dir.path() + "/job/e050/cgroup.procs", "");
  writeFile(dir.path() + "/job/busy/cgroup.procs", "");
  EXPECT_EQ(pids(index, &visited), (std::vector<pid_t>{10}));
  EXPECT_EQ(pids(index, &visited), (std::vector<pid_t>{10}));
  EXPECT_EQ(visited, 2u) << "the top and e123";
  auto whole = job->subtreeProcs();
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole->size(), 1u);
}

// Giving watches back queues an IN_IGNORED each: a large tree ending gives
// them back a bounded number a drain, so it never overflows the queue and
// sends every other tree to look again.
TEST_F(TreeWatch, ALargeTreeEndingGivesItsWatchesBackWithoutOverflowingTheQueue) {
  for (int i = 300; i < 1400; ++i) cgroupAt(fmt::format("{}/job/e{:03}", dir.path(), i), "", false);
  cgroupAt(dir.path() + "/other", "20\n", true);
  auto other = cgroup::Cgroup::open(*root, "/other");
  ASSERT_TRUE(other);
  cgroup::SubtreeIndex victim(*watcher, *other);
  pids(victim);
  {
    cgroup::SubtreeIndex big(*watcher, *job);
    pids(big);
    EXPECT_EQ(watcher->watches(), 2 * 1402u + 2);
  }
  EXPECT_EQ(watcher->watches(), 2 * 1402u + 2) << "retiring, not given back yet";
  std::size_t drains = 0;
  while (watcher->watches() > 2) {
    watcher->drain();
    ++drains;
    ASSERT_LT(drains, 10u);
  }
  EXPECT_EQ(drains, (2 * 1402 + cgroup::TreeWatcher::kRetirePerDrain - 1) /
                        cgroup::TreeWatcher::kRetirePerDrain);
  watcher->drain();  // the IN_IGNORED of the last ones
  EXPECT_EQ(watcher->overflows(), 0u);
  EXPECT_FALSE(victim.lastDrop());
  std::size_t visited = 0;
  EXPECT_EQ(pids(victim, &visited), (std::vector<pid_t>{20}));
  EXPECT_EQ(visited, 1u);
}

TEST_F(TreeWatch, OneOwnersTreesHoldAQuarterOfTheWatchesAtMost) {
  auto w = cgroup::TreeWatcher::open(800);
  ASSERT_TRUE(w);
  cgroup::SubtreeIndex index(**w, *job, 1000);
  cgroup::SubtreeWalk walk;
  auto procs = index.procs({}, &walk);
  ASSERT_TRUE(procs) << procs.error().message;
  EXPECT_EQ(procs->size(), 2u) << "whole, and right";
  EXPECT_EQ(index.wholeWalks(), 1u);
  ASSERT_TRUE(index.lastDrop());
  EXPECT_EQ(
      *index.lastDrop(),
      "uid 1000's lease trees hold 200 of the daemon's inotify watches, a quarter of its cap");
  cgroup::SubtreeIndex roots(**w, *job, 0);
  ASSERT_TRUE(roots.procs({}, &walk));
  EXPECT_EQ(roots.wholeWalks(), 0u) << "root's are capped by the whole cap only";
}

TEST_F(TreeWatch, AWatchPastTheCapMakesTheWalkWholeNeverWrong) {
  auto small = cgroup::TreeWatcher::open(40);
  ASSERT_TRUE(small);
  cgroup::SubtreeIndex index(**small, *job);
  cgroup::SubtreeWalk walk;
  auto procs = index.procs({}, &walk);
  ASSERT_TRUE(procs) << procs.error().message;
  EXPECT_EQ(procs->size(), 2u);
  EXPECT_EQ(walk.visited, 302u);
  EXPECT_EQ(index.wholeWalks(), 1u);
  ASSERT_TRUE(index.lastDrop());
  EXPECT_EQ(*index.lastDrop(),
            "the daemon holds 40 inotify watches on lease trees, its cap (half of "
            "fs.inotify.max_user_watches)");
  (*small)->drain();
  EXPECT_EQ((*small)->watches(), 0u) << "what it had watched is given back";
  // The next walks are whole too (no watch churn at every sample), and right.
  cgroupAt(dir.path() + "/job/e005", "15\n", true);
  procs = index.procs({}, &walk);
  ASSERT_TRUE(procs);
  EXPECT_EQ(procs->size(), 3u);
  EXPECT_EQ(index.wholeWalks(), 2u);
}

TEST_F(TreeWatch, TreesThatOverlapShareWatchesAndOneLeavingKeepsTheOthers) {
  auto busy = cgroup::Cgroup::open(*root, "/job/busy");
  ASSERT_TRUE(busy);
  cgroup::SubtreeIndex parent(*watcher, *job);
  pids(parent);
  const std::size_t alone = watcher->watches();
  {
    cgroup::SubtreeIndex child(*watcher, *busy);
    EXPECT_EQ(pids(child), (std::vector<pid_t>{11}));
    EXPECT_EQ(watcher->watches(), alone) << "one inode, one watch";
  }
  EXPECT_EQ(watcher->watches(), alone);
  // The parent still hears the busy child's changes.
  cgroupAt(dir.path() + "/job/busy/late", "16\n", true);
  EXPECT_EQ(pids(parent), (std::vector<pid_t>{10, 11, 16}));
}

TEST_F(TreeWatch, AnOverflowedQueueMakesEveryIndexLookAtEverythingAgain) {
  cgroup::SubtreeIndex index(*watcher, *job);
  pids(index);
  const std::size_t watches = watcher->watches();
  auto queued = fs::Root::open("/proc/sys/fs/inotify");
  ASSERT_TRUE(queued);
  auto max = queued->read("max_queued_events");
  ASSERT_TRUE(max);
  const int n = std::stoi(*max) + 8;
  // Two files in turn: the kernel merges only an event equal to the last queued.
  for (int i = 0; i < n; ++i)
    writeFile(fmt::format("{}/job/e{:03}/cgroup.events", dir.path(), i % 2),
              "populated 0\nfrozen 0\n");
  std::size_t visited = 0;
  EXPECT_EQ(pids(index, &visited), (std::vector<pid_t>{10, 11}));
  EXPECT_EQ(watcher->overflows(), 1u);
  ASSERT_TRUE(index.lastDrop());
  EXPECT_EQ(*index.lastDrop(),
            "the kernel's inotify queue overflowed (fs.inotify.max_queued_events)");
  EXPECT_EQ(visited, 302u) << "every cgroup looked at again";
  EXPECT_EQ(watcher->watches(), watches) << "with the watches it had";
  EXPECT_EQ(pids(index, &visited), (std::vector<pid_t>{10, 11}));
  EXPECT_EQ(visited, 2u);
}

TEST_F(TreeWatch, TheWalksLimitsHoldAsTheWholeWalksDo) {
  cgroup::SubtreeIndex index(*watcher, *job);
  cgroup::SubtreeWalk walk;
  auto procs = index.procs({64, 100}, &walk);
  ASSERT_FALSE(procs);
  EXPECT_TRUE(walk.tooMany);
  EXPECT_EQ(procs.error().message,
            "the cgroup tree under /job has more than 100 cgroups; tally does not walk trees that "
            "large");
  // Once indexed, the same budget meters it: only the busy cgroups cost.
  ASSERT_TRUE(index.procs({}, &walk));
  procs = index.procs({64, 100}, &walk);
  ASSERT_TRUE(procs) << procs.error().message;
  EXPECT_EQ(walk.visited, 2u);
  // Depth: a populated chain deeper than the limit is refused.
  std::string deep = dir.path() + "/job/busy";
  for (int i = 0; i < 5; ++i) {
    deep += "/d";
    cgroupAt(deep, "", true);
  }
  watcher->drain();
  procs = index.procs({3, 100}, &walk);
  ASSERT_FALSE(procs);
  EXPECT_TRUE(walk.tooDeep);
  EXPECT_EQ(procs.error().message,
            "the cgroup tree under /job is deeper than 3 levels; tally does not walk trees that "
            "deep");
}

TEST_F(TreeWatch, TheCgroupRemovedIsGoneAsForTheWholeWalk) {
  std::string path = dir.path() + "/lone";
  cgroupAt(path, "42\n", false);  // its own cgroup.procs is read whatever populated says
  auto lone = cgroup::Cgroup::open(*root, "/lone");
  ASSERT_TRUE(lone);
  cgroup::SubtreeIndex index(*watcher, *lone);
  EXPECT_EQ(pids(index), (std::vector<pid_t>{42}));
  std::filesystem::remove_all(path);
  watcher->drain();
  auto procs = index.procs();
  ASSERT_FALSE(procs);
  EXPECT_EQ(procs.error().code, ENOENT);
  EXPECT_EQ(procs.error().message,
            "cgroup /lone is gone (removed; a cgroup made again under its name is another one)");
}

// The decoder of what read() on the inotify fd returns.
std::string record(int wd, std::uint32_t mask, std::string_view name, std::size_t padTo) {
  inotify_event head{};
  head.wd = wd;
  head.mask = mask;
  head.len = static_cast<std::uint32_t>(padTo);
  std::string out(reinterpret_cast<const char*>(&head), sizeof head);
  std::string padded(name);
  padded.resize(padTo, '\0');
  return out + padded;
}

TEST(InotifyEvents, RecordsWithPaddedNamesAndNoneAreDecodedWhole) {
  std::string bytes = record(3, IN_CREATE | IN_ISDIR, "step_0", 16) + record(4, IN_MODIFY, "", 0) +
                      record(-1, IN_Q_OVERFLOW, "", 0);
  auto events = cgroup::decodeInotify(bytes);
  ASSERT_TRUE(events) << events.error().message;
  ASSERT_EQ(events->size(), 3u);
  EXPECT_EQ((*events)[0].wd, 3);
  EXPECT_EQ((*events)[0].mask, IN_CREATE | IN_ISDIR);
  EXPECT_EQ((*events)[0].name, "step_0");
  EXPECT_EQ((*events)[1].name, "");
  EXPECT_EQ((*events)[2].mask, IN_Q_OVERFLOW);
}

TEST(InotifyEvents, ATornOrOverlongRecordIsAnErrorNamingWhere) {
  std::string one = record(3, IN_CREATE, "x", 16);
  auto torn = cgroup::decodeInotify(one + one.substr(0, 10));
  ASSERT_FALSE(torn);
  EXPECT_EQ(torn.error().message,
            fmt::format("inotify record at byte {} is cut short (10 bytes left)", one.size()));
  std::string longer = one;
  inotify_event head{};
  std::memcpy(&head, longer.data(), sizeof head);
  head.len = 1000;
  std::memcpy(longer.data(), &head, sizeof head);
  auto overlong = cgroup::decodeInotify(longer);
  ASSERT_FALSE(overlong);
  EXPECT_EQ(overlong.error().message, "inotify record at byte 0 names 1000 bytes, 16 are left");
}

}  // namespace
}  // namespace tally
