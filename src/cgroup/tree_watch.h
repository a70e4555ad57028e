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
// change from a workqueue, at most once per 10 ms per file
// (cgroup_file_notify, CGROUP_FILE_NOTIFY_MIN_INTV), so a process moved into
// an empty cgroup in the few ms before a sample is found at the next one.
// mkdir and rmdir are queued before they return. "populated 0" is not quite
// "nothing listed": a leader that exited while its threads moved on stays in
// cgroup.procs (css_task_iter lists a dying leader with live threads), so a
// cgroup that empties, and every cgroup seen for the first time, has its
// cgroup.procs read once, and one that still lists something is read at
// every walk until it lists nothing (as the whole walk would). A queue
// overflow, and every kSteadyWalkEvery walks of a meter, make the next walk
// look at every cgroup again (the watches stay); a watch past the caps makes
// the walks whole for a while.
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
  // fs.inotify.max_user_watches is shared by every process of the user. One
  // non-root owner's trees may hold a quarter of them.
  static Result<std::unique_ptr<TreeWatcher>> open(std::size_t maxWatches);
  TreeWatcher(const TreeWatcher&) = delete;
  TreeWatcher& operator=(const TreeWatcher&) = delete;

  // Reads what the kernel queued and marks the cgroups it concerns in their
  // indexes; then gives back up to kRetirePerDrain watches no index holds
  // any more. When nothing changed: one read() that returns EAGAIN.
  void drain();

  // Readable when the kernel queued something: the daemon drains it from its
  // loop as it comes, not only once a sample round, so a burst of changes
  // seldom fills the kernel's queue.
  int fd() const { return fd_.get(); }
  std::size_t watches() const { return watches_; }  // held, the retiring included
  std::size_t maxWatches() const { return max_; }
  std::uint64_t overflows() const { return overflows_; }

  // Half of fs.inotify.max_user_watches (absent: of the kernel's floor, 8,192).
  static std::size_t defaultMaxWatches(const std::optional<std::uint64_t>& maxUserWatches);
  // inotify_rm_watch queues an IN_IGNORED for each watch given back: at most
  // this many a drain, so that ending a large tree never overflows the
  // kernel's queue (fs.inotify.max_queued_events, 16,384 by default) and
  // makes every other tree look again.
  static constexpr std::size_t kRetirePerDrain = 2048;

 private:
  friend class SubtreeIndex;
  explicit TreeWatcher(UniqueFd fd, std::size_t max) : fd_(std::move(fd)), max_(max) {}
  struct Sub {
    SubtreeIndex* index;
    void* node;   // the index's node (SubtreeIndex::Node)
    bool events;  // its cgroup.events file (else its directory)
  };
  // A watch on the inode open as `fd`, for one node of `sub.index`.
  Result<int> add(int fd, std::uint32_t mask, const Sub& sub, uid_t owner);
  void remove(int wd, const SubtreeIndex* index, uid_t owner);
  void attach(SubtreeIndex* index) { indexes_.insert(index); }
  void detach(SubtreeIndex* index) { indexes_.erase(index); }

  UniqueFd fd_;
  std::size_t max_;
  std::size_t watches_ = 0;
  std::uint64_t overflows_ = 0;
  std::unordered_map<int, std::vector<Sub>> subs_;
  std::map<uid_t, std::size_t> byOwner_;  // subscriptions of non-root owners' indexes
  std::set<int> retiring_;                // held by no index, not yet given back
  std::set<SubtreeIndex*> indexes_;
};

class SubtreeIndex {
 public:
  // `cg` is held by the caller for the index's life; `owner`, the uid whose
  // share of the watches it draws on (0: root, not capped per owner).
  SubtreeIndex(TreeWatcher& watcher, const Cgroup& cg, uid_t owner = 0);
  ~SubtreeIndex();
  SubtreeIndex(const SubtreeIndex&) = delete;
  SubtreeIndex& operator=(const SubtreeIndex&) = delete;

  // The processes of the subtree, as Cgroup::subtreeProcs lists them (same
  // limits, same errors), reading cgroup.procs only where something runs or
  // changed. `walk->visited`: the cgroups opened this time.
  Result<std::vector<SubtreeProc>> procs(const SubtreeLimits& limits = {},
                                         SubtreeWalk* walk = nullptr);

  std::size_t indexed() const { return count_; }
  // Walks that were whole because a watch was refused; why the index last
  // started over or looked at everything again (absent: never).
  std::uint64_t wholeWalks() const { return wholeWalks_; }
  const std::optional<std::string>& lastDrop() const { return lastDrop_; }
  // Forgets everything (its watches retire; the next walk indexes again).
  void drop(std::string reason);
  // Keeps the watches, but the next walk opens every cgroup again, reads
  // each one's cgroup.events and cgroup.procs and lists it: what a missed
  // notice left wrong is right after it.
  void recheck(std::string reason);

  // Cgroups one index follows at most: the largest tree any walk takes.
  static constexpr std::size_t kMaxIndexed = SubtreeLimits{}.maxCgroups;
  // After a watch is refused, this many walks are whole before indexing is
  // tried again (each try would add and give back watches).
  static constexpr unsigned kWholeWalksAfterRefusal = 60;

 private:
  friend class TreeWatcher;
  struct Node {
    Node* parent = nullptr;
    std::string name;  // below the parent; "" for the top
    int dirWd = -1, eventsWd = -1;
    std::optional<bool> populated;  // absent: unreadable (walked as populated)
    bool seen = false;              // opened once: its procs read and its children listed
    bool lingering = false;         // "populated 0", yet cgroup.procs lists someone
    bool reread = false;            // its cgroup.events changed
    bool relist = false;            // its directory changed
    std::map<std::string, std::unique_ptr<Node>, std::less<>> children;
    // The children a walk goes into: new, changed, populated, lingering, or
    // with such a child below. A child quiet at its visit leaves it.
    std::set<std::string, std::less<>> toWalk;
  };
  void note(Node* n, bool events, std::uint32_t mask, std::string_view name);
  void forget(Node* n);  // it and everything below it
  void unwatch(Node& n);
  void walkAgain(Node* n);  // back in its parent's toWalk, and so up to the top
  std::size_t count(const Node& n) const;

  TreeWatcher& watcher_;
  const Cgroup& cg_;
  uid_t owner_;
  std::unique_ptr<Node> top_;
  std::size_t count_ = 0;
  bool recheck_ = false;
  unsigned wholeLeft_ = 0;  // walks still to be made whole
  std::uint64_t wholeWalks_ = 0;
  std::optional<std::string> lastDrop_;
};

}  // namespace tally::cgroup
