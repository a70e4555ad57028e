#include "cgroup/tree_watch.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/inotify.h>

#include <algorithm>
#include <array>

#include "cgroup/inotify_events.h"
#include "cgroup/subtree_walk.h"
#include "probes/cgroup_memory.h"

namespace tally::cgroup {
namespace {

// A cgroup's directory: children made and removed (cgroup v2 refuses rename,
// cgroup_rename's EPERM on the default hierarchy; a move is still handled).
constexpr std::uint32_t kDirMask =
    IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_MOVE_SELF | IN_ONLYDIR;
// Its cgroup.events: kernfs_notify sends IN_MODIFY when "populated" or
// "frozen" changes.
constexpr std::uint32_t kEventsMask = IN_MODIFY;

// "populated" from cgroup.events; absent when it cannot be read or says
// nothing (then the cgroup is walked as if something ran there).
std::optional<bool> readPopulated(int dirFd, std::array<char, 512>& buf, std::string& spill) {
  auto text = fs::readAt(dirFd, file::kEvents, buf, spill);
  if (!text) return std::nullopt;
  auto ev = probes::parseFlatKeyed(*text);
  if (!ev || !ev->get("populated")) return std::nullopt;
  return *ev->get("populated") != 0;
}

std::string below(const std::string& parent, std::string_view name) {
  return parent.empty() ? std::string(name) : parent + "/" + std::string(name);
}

}  // namespace

Result<std::unique_ptr<TreeWatcher>> TreeWatcher::open(std::size_t maxWatches) {
  UniqueFd fd(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (!fd.valid())
    return errnoError(errno,
                      "cannot make an inotify instance for lease trees "
                      "(fs.inotify.max_user_instances?)");
  return std::unique_ptr<TreeWatcher>(new TreeWatcher(std::move(fd), maxWatches));
}

std::size_t TreeWatcher::defaultMaxWatches(const std::optional<std::uint64_t>& maxUserWatches) {
  return static_cast<std::size_t>(maxUserWatches.value_or(8192) / 2);
}

Result<int> TreeWatcher::add(int fd, std::uint32_t mask, const Sub& sub) {
  if (watches_ >= max_)
    return Error{ENOSPC, fmt::format("the daemon holds {} inotify watches on lease trees, its cap "
                                     "(half of fs.inotify.max_user_watches)",
                                     watches_)};
  char path[40];
  std::snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  int wd = ::inotify_add_watch(fd_.get(), path, mask);
  if (wd < 0) return errnoError(errno, "cannot watch a cgroup in a lease's tree");
  auto& subs = subs_[wd];
  if (subs.empty()) ++watches_;
  subs.push_back(sub);
  return wd;
}

void TreeWatcher::remove(int wd, const SubtreeIndex* index) {
  auto it = subs_.find(wd);
  if (it == subs_.end()) return;
  auto& subs = it->second;
  subs.erase(
      std::remove_if(subs.begin(), subs.end(), [&](const Sub& s) { return s.index == index; }),
      subs.end());
  if (!subs.empty()) return;
  ::inotify_rm_watch(fd_.get(), wd);  // EINVAL when the kernel removed it already: the same end
  subs_.erase(it);
  --watches_;
}

void TreeWatcher::drain() {
  // Aligned for the kernel's records; 64 KiB takes ~2,000 events a read.
  alignas(inotify_event) std::array<char, 65536> buf;
  for (;;) {
    ssize_t n = ::read(fd_.get(), buf.data(), buf.size());
    if (n <= 0) return;  // EAGAIN: nothing more queued
    auto events = decodeInotify(std::string_view(buf.data(), static_cast<std::size_t>(n)));
    if (!events) {
      // Not a record boundary: trust nothing queued; every index walks afresh.
      for (SubtreeIndex* index : indexes_) index->drop(events.error().message);
      return;
    }
    for (const auto& e : *events) {
      if (e.mask & IN_Q_OVERFLOW) {
        ++overflows_;
        for (SubtreeIndex* index : indexes_)
          index->drop("the kernel's inotify queue overflowed (fs.inotify.max_queued_events)");
        continue;
      }
      auto it = subs_.find(e.wd);
      if (it == subs_.end()) continue;
      if (e.mask & IN_IGNORED) {  // its inode is gone: so is the watch
        --watches_;
        auto subs = std::move(it->second);
        subs_.erase(it);
        for (const auto& s : subs) s.index->note(s.path, s.events, e.mask, e.name);
        continue;
      }
      // Copied: a note may drop an index, which edits subs_.
      auto subs = it->second;
      for (const auto& s : subs)
        if (indexes_.count(s.index)) s.index->note(s.path, s.events, e.mask, e.name);
    }
  }
}

SubtreeIndex::SubtreeIndex(TreeWatcher& watcher, const Cgroup& cg) : watcher_(watcher), cg_(cg) {
  watcher_.attach(this);
}

SubtreeIndex::~SubtreeIndex() {
  for (auto& [path, n] : nodes_) unwatch(n);
  watcher_.detach(this);
}

void SubtreeIndex::unwatch(Node& n) {
  if (n.dirWd >= 0) watcher_.remove(n.dirWd, this);
  if (n.eventsWd >= 0) watcher_.remove(n.eventsWd, this);
  n.dirWd = n.eventsWd = -1;
}

void SubtreeIndex::drop(std::string reason) {
  for (auto& [path, n] : nodes_) unwatch(n);
  nodes_.clear();
  lastDrop_ = std::move(reason);
}

void SubtreeIndex::forget(const std::string& path) {
  auto first = nodes_.lower_bound(path);
  auto it = first;
  const std::string prefix = path.empty() ? "" : path + "/";
  while (it != nodes_.end() && (it->first == path || it->first.starts_with(prefix))) {
    unwatch(it->second);
    ++it;
  }
  nodes_.erase(first, it);
}

void SubtreeIndex::walkAgain(const std::string& path) {
  if (path.empty()) return;  // the top is always walked
  auto slash = path.rfind('/');
  std::string parent = slash == std::string::npos ? std::string() : path.substr(0, slash);
  if (auto it = nodes_.find(parent); it != nodes_.end())
    it->second.toWalk.insert(path.substr(slash == std::string::npos ? 0 : slash + 1));
}

void SubtreeIndex::note(const std::string& path, bool events, std::uint32_t mask,
                        std::string_view name) {
  auto it = nodes_.find(path);
  if (it == nodes_.end()) return;
  Node& n = it->second;
  if (mask & IN_IGNORED) {
    // The kernel dropped the watch: the cgroup was removed (rmdir needs it
    // empty of children, so nothing indexed below it is left either).
    (events ? n.eventsWd : n.dirWd) = -1;
    if (!events) {
      forget(path);
    } else {
      n.reread = true;
      walkAgain(path);
    }
    return;
  }
  if (mask & (IN_MOVED_FROM | IN_MOVED_TO | IN_MOVE_SELF)) {
    drop(fmt::format("a cgroup below {} was moved", cg_.path()));
    return;
  }
  if (events) {
    n.reread = true;
    walkAgain(path);
    return;
  }
  n.relist = true;
  // A child removed is forgotten now, its watches given back, whether or
  // not this cgroup is walked again soon: kernfs keeps a watched directory's
  // inode, so the child's own watches would never hear of it.
  if ((mask & IN_DELETE) && !name.empty()) forget(below(path, name));
}

Result<std::vector<SubtreeProc>> SubtreeIndex::procs(const SubtreeLimits& limits,
                                                     SubtreeWalk* walkOut) {
  if (wholeLeft_ > 0) {
    --wholeLeft_;
    ++wholeWalks_;
    return cg_.subtreeProcs(limits, walkOut);
  }
  SubtreeWalk ownWalk;
  SubtreeWalk& walk = walkOut ? *walkOut : ownWalk;
  walk = {};
  struct Pending {
    std::shared_ptr<UniqueFd> parent;  // null for the top: the held directory itself
    std::string name;                  // below `parent`
    std::string rel;                   // below the cgroup ("" is the cgroup)
    std::string parentRel;             // its parent's `rel`
    std::size_t depth = 0;
  };
  std::vector<SubtreeProc> out;
  std::vector<Pending> stack;
  stack.push_back({nullptr, ".", "", "", 0});
  std::array<char, 8192> buf;
  std::array<char, 512> small;
  std::string spill;
  auto tooMany = [&] {
    walk.tooMany = true;
    return treewalk::tooMany(cg_.path(), limits.maxCgroups);
  };
  // A watch refused (the cap, the host's limit): this walk and the next
  // ones are whole, as without an index, and indexing is tried again later.
  auto whole = [&](const Error& why) {
    drop(why.message);
    wholeLeft_ = kWholeWalksAfterRefusal;
    ++wholeWalks_;
    return cg_.subtreeProcs(limits, walkOut);
  };
  while (!stack.empty()) {
    Pending p = std::move(stack.back());
    stack.pop_back();
    const bool top = !p.parent;
    auto dir =
        std::make_shared<UniqueFd>(::openat(top ? cg_.dirFd() : p.parent->get(), p.name.c_str(),
                                            O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
    if (!dir->valid()) {
      if (!top) {  // removed mid-walk, or before its parent's IN_DELETE was read
        forget(p.rel);
        continue;
      }
      return errnoError(errno, "cannot open cgroup " + cg_.path());
    }
    if (++walk.visited > limits.maxCgroups) return tooMany();
    auto [at, made] = nodes_.try_emplace(p.rel);
    // An index as large as the largest tree tally walks is refused as that
    // walk is: a tree that grew past it is not followed.
    if (made && nodes_.size() > kMaxIndexed) {
      drop(fmt::format("its tree grew past {} cgroups", kMaxIndexed));
      return tooMany();
    }
    Node& n = at->second;
    // Watched before it is read: a change after the read is queued.
    if (n.dirWd < 0) {
      auto wd = watcher_.add(dir->get(), kDirMask, {this, p.rel, false});
      if (!wd) return whole(wd.error());
      n.dirWd = *wd;
      n.children.reset();
    }
    if (n.eventsWd < 0) {
      UniqueFd ev(::openat(dir->get(), file::kEvents, O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
      if (ev.valid()) {  // none (not cgroupfs): never cached as empty
        auto wd = watcher_.add(ev.get(), kEventsMask, {this, p.rel, true});
        if (!wd) return whole(wd.error());
        n.eventsWd = *wd;
      }
      n.reread = true;
    }
    if (n.reread) {
      n.populated = n.eventsWd >= 0 ? readPopulated(dir->get(), small, spill) : std::nullopt;
      n.reread = false;
    }
    const std::string path = p.rel.empty() ? cg_.path() : treewalk::childPath(cg_.path(), p.rel);
    // The cgroup itself is always read: its removal is an error, never an
    // empty lease. Below it, an empty subtree is skipped whole.
    if (!top && n.populated == false) {
      // Skipped from now on, until its notice (or a relisting) says otherwise;
      // its children's list stays current: its directory is watched.
      if (auto parent = nodes_.find(p.parentRel); parent != nodes_.end())
        parent->second.toWalk.erase(p.name);
      continue;
    }
    auto procs = fs::readAt(dir->get(), file::kProcs, buf, spill);
    if (!procs && top) {
      if (procs.error().code == ENOENT) return treewalk::gone(cg_.path());
      return errnoError(procs.error().code, "cannot read " + cg_.describe(file::kProcs));
    }
    treewalk::appendPids(procs ? *procs : std::string_view{}, path, out);
    if (top && n.populated == false) continue;
    if (!n.children || n.relist) {
      std::vector<std::string> names;
      fs::forEachEntry(dir->get(), [&](std::string_view name, unsigned char type) {
        if (type == DT_DIR) names.emplace_back(name);
        return true;
      });
      std::sort(names.begin(), names.end());
      if (n.children)  // a child gone: its index goes with it
        for (const auto& old : *n.children)
          if (!std::binary_search(names.begin(), names.end(), old)) forget(below(p.rel, old));
      n.children = std::move(names);  // `n` stands: forget() erased other map nodes only
      n.relist = false;
      n.toWalk.clear();
      for (const auto& c : *n.children) {
        auto it = nodes_.find(below(p.rel, c));
        if (it == nodes_.end() || it->second.populated != false || it->second.reread ||
            it->second.eventsWd < 0)
          n.toWalk.insert(c);
      }
    }
    // Copied: the walk below edits the set as it learns a child is empty.
    std::vector<std::string> next(n.toWalk.begin(), n.toWalk.end());
    if (next.empty()) continue;
    if (walk.visited + stack.size() + next.size() > limits.maxCgroups) return tooMany();
    if (p.depth + 1 > limits.maxDepth) {
      walk.tooDeep = true;
      return treewalk::tooDeep(cg_.path(), limits.maxDepth);
    }
    for (auto c = next.rbegin(); c != next.rend(); ++c)  // popped in name order
      stack.push_back({dir, *c, below(p.rel, *c), p.rel, p.depth + 1});
  }
  return out;
}

}  // namespace tally::cgroup
