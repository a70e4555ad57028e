// A lease's cgroup tree followed by inotify, so that a wide tree costs the
// meter at its changes, not at every sample (a user may mkdir 16,000 cgroups
// below her delegated one; walked whole, two such trees held the daemon at
// 60 % CPU).
//
// TreeWatcher is the daemon's one inotify instance for every lease's tree:
// root's inotify instances are few and shared with the whole host (systemd
// needs them), so a lease never costs one. Its watches are capped, and shared
// between trees that overlap (a child lease's cgroup lies inside its parent's
// tree: the kernel gives one inode one watch per instance).
//
// SubtreeIndex is one lease's tree as its walks found it: for each cgroup
// reached, whether anything runs in its subtree (cgroup.events "populated",
// watched for IN_MODIFY) and its children (its directory watched for
// IN_CREATE and IN_DELETE). A walk through the index opens only the cgroups
// where something runs, and children it has not seen before. An empty cgroup
// is skipped on its cached "populated 0": populated is upward closed (a
// process anywhere below a cgroup makes it populated), so an empty cgroup's
// own watch covers its whole subtree. A cgroup's children are listed again
// only after its directory changed.
//
// What it can miss, and for how long: the kernel reports a cgroup.events
// change from a workqueue, at most once per 20 ms per file
// (cgroup_file_notify, CGROUP_FILE_NOTIFY_MIN_INTV), so a process moved into
// an empty cgroup in the few ms before a sample is found at the next one.
// mkdir and rmdir are queued before they return. A queue overflow, a moved
// directory or a watch past the cap drops the index: that walk is whole (as
// without an index), and the next one indexes again.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cgroup/cgroup.h"
#include "util/result.h"
#include "util/unique_fd.h"

namespace tally::cgroup {

class SubtreeIndex;

class TreeWatcher {
 public:
  // `maxWatches`: the inotify watches it may hold (two per cgroup indexed);
  // fs.inotify.max_user_watches is shared by every process of the user.
  static Result<std::unique_ptr<TreeWatcher>> open(std::size_t maxWatches);
  TreeWatcher(const TreeWatcher&) = delete;
  TreeWatcher& operator=(const TreeWatcher&) = delete;

  // Reads what the kernel queued and marks the cgroups it concerns in their
  // indexes. When nothing changed: one read() that returns EAGAIN.
  void drain();

  std::size_t watches() const { return watches_; }
  std::size_t maxWatches() const { return max_; }
  std::uint64_t overflows() const { return overflows_; }

  // fs.inotify.max_user_watches as `procSys` ("/proc/sys") says, halved:
  // tally takes at most half of what the user may hold. Absent: 8,192 (the
  // kernel's floor), halved.
  static std::size_t defaultMaxWatches(const std::optional<std::uint64_t>& maxUserWatches);

 private:
  friend class SubtreeIndex;
  explicit TreeWatcher(UniqueFd fd, std::size_t max) : fd_(std::move(fd)), max_(max) {}
  struct Sub {
    SubtreeIndex* index;
    std::string path;  // relative to the index's cgroup
    bool events;       // its cgroup.events file (else its directory)
  };
  // A watch on the inode open as `fd`, for `index`'s cgroup `path`.
  Result<int> add(int fd, std::uint32_t mask, const Sub& sub);
  void remove(int wd, const SubtreeIndex* index);
  void attach(SubtreeIndex* index) { indexes_.insert(index); }
  void detach(SubtreeIndex* index) { indexes_.erase(index); }

  UniqueFd fd_;
  std::size_t max_;
  std::size_t watches_ = 0;
  std::uint64_t overflows_ = 0;
  std::unordered_map<int, std::vector<Sub>> subs_;
  std::set<SubtreeIndex*> indexes_;
};

class SubtreeIndex {
 public:
  // `cg` is held by the caller for the index's life.
  SubtreeIndex(TreeWatcher& watcher, const Cgroup& cg);
  ~SubtreeIndex();
  SubtreeIndex(const SubtreeIndex&) = delete;
  SubtreeIndex& operator=(const SubtreeIndex&) = delete;

  // The processes of the subtree, as Cgroup::subtreeProcs lists them (same
  // limits, same errors), reading cgroup.procs only where something runs.
  // `walk->visited`: the cgroups opened this time.
  Result<std::vector<SubtreeProc>> procs(const SubtreeLimits& limits = {},
                                         SubtreeWalk* walk = nullptr);

  std::size_t indexed() const { return nodes_.size(); }
  // Walks that were whole because the index had been dropped, and why the
  // last drop was (absent: never dropped).
  std::uint64_t wholeWalks() const { return wholeWalks_; }
  const std::optional<std::string>& lastDrop() const { return lastDrop_; }
  // Forgets everything (the next walk indexes again), saying why.
  void drop(std::string reason);

 private:
  friend class TreeWatcher;
  struct Node {
    int dirWd = -1, eventsWd = -1;
    std::optional<bool> populated;                     // absent: unreadable (walked as populated)
    std::optional<std::vector<std::string>> children;  // in name order; absent: to be listed
    // The children a walk goes into: not known to be empty (new, populated,
    // unreadable, or changed since). A child's notice puts it back.
    std::set<std::string> toWalk;
    bool reread = false;  // its cgroup.events changed
    bool relist = false;  // its directory changed
  };
  void note(const std::string& path, bool events, std::uint32_t mask, std::string_view name);
  void forget(const std::string& path);     // it and everything below it
  void walkAgain(const std::string& path);  // back in its parent's toWalk
  void unwatch(Node& n);

  TreeWatcher& watcher_;
  const Cgroup& cg_;
  std::map<std::string, Node> nodes_;  // by path below the cgroup ("" is the cgroup)
  // After a watch is refused, this many walks are whole before indexing is
  // tried again (each try would add and drop watches).
  static constexpr unsigned kWholeWalksAfterRefusal = 60;
  // Cgroups one index follows at most: the largest tree any walk takes.
  static constexpr std::size_t kMaxIndexed = SubtreeLimits{}.maxCgroups;
  unsigned wholeLeft_ = 0;  // walks still to be made whole
  std::uint64_t wholeWalks_ = 0;
  std::optional<std::string> lastDrop_;
};

}  // namespace tally::cgroup
