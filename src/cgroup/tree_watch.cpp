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

// A cgroup's directory: children made and removed (cgroup v2 has no rename:
// its kernfs syscall ops lack one; a move is still handled).
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

Result<int> TreeWatcher::add(int fd, std::uint32_t mask, const Sub& sub, uid_t owner) {
  if (watches_ >= max_)
    return Error{ENOSPC, fmt::format("the daemon holds {} inotify watches on lease trees, its cap "
                                     "(half of fs.inotify.max_user_watches)",
                                     watches_)};
  if (owner != 0 && byOwner_[owner] >= max_ / 4)
    return Error{ENOSPC, fmt::format("uid {}'s lease trees hold {} of the daemon's inotify "
                                     "watches, a quarter of its cap",
                                     owner, byOwner_[owner])};
  char path[40];
  std::snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  int wd = ::inotify_add_watch(fd_.get(), path, mask);
  if (wd < 0) return errnoError(errno, "cannot watch a cgroup in a lease's tree");
  auto& subs = subs_[wd];
  if (subs.empty() && !retiring_.erase(wd)) ++watches_;  // a retiring one is held again
  subs.push_back(sub);
  if (owner != 0) ++byOwner_[owner];
  return wd;
}

void TreeWatcher::remove(int wd, const SubtreeIndex* index, uid_t owner) {
  auto it = subs_.find(wd);
  if (it == subs_.end()) return;
  auto& subs = it->second;
  auto gone =
      std::remove_if(subs.begin(), subs.end(), [&](const Sub& s) { return s.index == index; });
  if (gone == subs.end()) return;
  subs.erase(gone, subs.end());
  if (owner != 0)
    if (auto o = byOwner_.find(owner); o != byOwner_.end() && --o->second == 0) byOwner_.erase(o);
  if (!subs.empty()) return;
  subs_.erase(it);
  retiring_.insert(wd);  // given back by drain(), a bounded number at a time
}

void TreeWatcher::drain() {
  // Aligned for the kernel's records; 64 KiB takes ~2,000 events a read.
  alignas(inotify_event) std::array<char, 65536> buf;
  for (;;) {
    ssize_t n = ::read(fd_.get(), buf.data(), buf.size());
    if (n <= 0) break;  // EAGAIN: nothing more queued
    auto events = decodeInotify(std::string_view(buf.data(), static_cast<std::size_t>(n)));
    if (!events) {
      // Not a record boundary: trust nothing queued; every index looks again.
      for (SubtreeIndex* index : indexes_) index->recheck(events.error().message);
      break;
    }
    for (const auto& e : *events) {
      if (e.mask & IN_Q_OVERFLOW) {
        ++overflows_;
        for (SubtreeIndex* index : indexes_)
          index->recheck("the kernel's inotify queue overflowed (fs.inotify.max_queued_events)");
        continue;
      }
      if ((e.mask & IN_IGNORED) && retiring_.erase(e.wd)) {
        --watches_;  // the kernel gave it back first (its inode is gone)
        continue;
      }
      auto it = subs_.find(e.wd);
      if (it == subs_.end()) continue;  // given back already
      // Copied: a note may forget nodes, which edits subs_ (never this
      // event's other subscribers: one inode is one node per index).
      auto subs = it->second;
      if (e.mask & IN_IGNORED) {  // its inode is gone: so is the watch
        --watches_;
        subs_.erase(e.wd);
      }
      for (const auto& s : subs)
        if (indexes_.count(s.index))
          s.index->note(static_cast<SubtreeIndex::Node*>(s.node), s.events, e.mask, e.name);
    }
  }
  for (std::size_t i = 0; i < kRetirePerDrain && !retiring_.empty(); ++i) {
    int wd = *retiring_.begin();
    retiring_.erase(retiring_.begin());
    ::inotify_rm_watch(fd_.get(), wd);  // EINVAL if the kernel removed it: the same end
    --watches_;
  }
}

SubtreeIndex::SubtreeIndex(TreeWatcher& watcher, const Cgroup& cg, uid_t owner)
    : watcher_(watcher), cg_(cg), owner_(owner) {
  watcher_.attach(this);
}

SubtreeIndex::~SubtreeIndex() {
  if (top_) forget(top_.get());
  watcher_.detach(this);
}

void SubtreeIndex::unwatch(Node& n) {
  if (n.dirWd >= 0) watcher_.remove(n.dirWd, this, owner_);
  if (n.eventsWd >= 0) watcher_.remove(n.eventsWd, this, owner_);
  n.dirWd = n.eventsWd = -1;
}

std::size_t SubtreeIndex::count(const Node& n) const {
  std::size_t c = 1;
  for (const auto& [name, child] : n.children) c += count(*child);
  return c;
}

void SubtreeIndex::forget(Node* n) {
  // Iterative: a chain is as deep as the walk let it be (64 levels).
  std::vector<Node*> stack{n};
  while (!stack.empty()) {
    Node* x = stack.back();
    stack.pop_back();
    unwatch(*x);
    --count_;
    for (auto& [name, child] : x->children) stack.push_back(child.get());
  }
  if (!n->parent) {
    top_.reset();
    return;
  }
  Node* parent = n->parent;
  parent->toWalk.erase(n->name);
  parent->children.erase(n->name);  // destroys n and everything below it
}

void SubtreeIndex::drop(std::string reason) {
  if (top_) forget(top_.get());
  lastDrop_ = std::move(reason);
}

void SubtreeIndex::recheck(std::string reason) {
  recheck_ = true;
  lastDrop_ = std::move(reason);
}

void SubtreeIndex::walkAgain(Node* n) {
  for (; n->parent; n = n->parent)
    if (!n->parent->toWalk.insert(n->name).second) return;  // its ancestors have it already
}

void SubtreeIndex::note(Node* n, bool events, std::uint32_t mask, std::string_view name) {
  if (mask & IN_IGNORED) {
    // The kernel dropped the watch: the cgroup was removed (rmdir needs it
    // without children, so nothing indexed below it is left either).
    (events ? n->eventsWd : n->dirWd) = -1;
    if (!events) {
      forget(n);
    } else {
      n->reread = true;
      walkAgain(n);
    }
    return;
  }
  if (mask & (IN_MOVED_FROM | IN_MOVED_TO | IN_MOVE_SELF)) {
    recheck(fmt::format("a cgroup below {} was moved", cg_.path()));
    return;
  }
  if (events) {
    n->reread = true;
    walkAgain(n);
    return;
  }
  n->relist = true;
  walkAgain(n);
  // A child removed is forgotten now, its watches given back, whether or
  // not this cgroup is walked again soon: kernfs keeps a watched directory's
  // inode, so the child's own watches would never hear of it.
  if (mask & IN_DELETE)
    if (auto c = n->children.find(name); c != n->children.end()) forget(c->second.get());
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
    Node* node;
    std::string path;  // from the cgroup root, for what is listed there
    std::size_t depth = 0;
  };
  if (!top_) {
    top_ = std::make_unique<Node>();
    ++count_;
  }
  const bool everything = recheck_;
  std::vector<SubtreeProc> out;
  std::vector<Pending> stack;
  stack.push_back({nullptr, top_.get(), cg_.path(), 0});
  std::array<char, 8192> buf;
  std::array<char, 512> small;
  std::string spill;
  auto tooMany = [&] {
    walk.tooMany = true;
    return treewalk::tooMany(cg_.path(), limits.maxCgroups);
  };
  // A watch refused (a cap, the host's limit): this walk and the next ones
  // are whole, as without an index, and indexing is tried again later.
  auto whole = [&](const Error& why) {
    drop(why.message);
    wholeLeft_ = kWholeWalksAfterRefusal;
    ++wholeWalks_;
    return cg_.subtreeProcs(limits, walkOut);
  };
  while (!stack.empty()) {
    Pending p = std::move(stack.back());
    stack.pop_back();
    Node& n = *p.node;
    const bool top = !p.parent;
    auto dir = std::make_shared<UniqueFd>(
        ::openat(top ? cg_.dirFd() : p.parent->get(), top ? "." : n.name.c_str(),
                 O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
    if (!dir->valid()) {
      if (!top) {  // removed mid-walk, or before its parent's IN_DELETE was read
        forget(&n);
        continue;
      }
      return errnoError(errno, "cannot open cgroup " + cg_.path());
    }
    if (++walk.visited > limits.maxCgroups) return tooMany();
    // Watched before it is read: a change after the read is queued.
    if (n.dirWd < 0) {
      auto wd = watcher_.add(dir->get(), kDirMask, {this, &n, false}, owner_);
      if (!wd) return whole(wd.error());
      n.dirWd = *wd;
      n.seen = false;
    }
    if (n.eventsWd < 0) {
      UniqueFd ev(::openat(dir->get(), file::kEvents, O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
      if (ev.valid()) {  // none (not cgroupfs): never taken for empty
        auto wd = watcher_.add(ev.get(), kEventsMask, {this, &n, true}, owner_);
        if (!wd) return whole(wd.error());
        n.eventsWd = *wd;
      }
      n.reread = true;
    }
    const bool first = !n.seen || everything;
    const bool reread = first || n.reread;
    if (reread) {
      n.populated = n.eventsWd >= 0 ? readPopulated(dir->get(), small, spill) : std::nullopt;
      n.reread = false;
    }
    // The top is always read (its removal is an error, never an empty
    // lease); an empty cgroup is read once more when it empties or is first
    // seen, and at every walk while it still lists someone.
    if (top || reread || n.populated != false || n.lingering) {
      auto procs = fs::readAt(dir->get(), file::kProcs, buf, spill);
      if (!procs && top) {
        if (procs.error().code == ENOENT) return treewalk::gone(cg_.path());
        return errnoError(procs.error().code, "cannot read " + cg_.describe(file::kProcs));
      }
      const std::size_t before = out.size();
      treewalk::appendPids(procs ? *procs : std::string_view{}, p.path, out);
      n.lingering = n.populated == false && out.size() > before;
    }
    if (first || n.relist) {
      std::vector<std::string> names;
      fs::forEachEntry(dir->get(), [&](std::string_view name, unsigned char type) {
        if (type == DT_DIR) names.emplace_back(name);
        return true;
      });
      std::sort(names.begin(), names.end());
      std::vector<Node*> goneChildren;
      for (auto& [name, child] : n.children)
        if (!std::binary_search(names.begin(), names.end(), name))
          goneChildren.push_back(child.get());
      for (Node* c : goneChildren) forget(c);
      for (auto& name : names) {
        auto [at, made] = n.children.try_emplace(name);
        if (made) {
          at->second = std::make_unique<Node>();
          at->second->parent = &n;
          at->second->name = name;
          // An index as large as the largest tree tally walks is refused as
          // that walk is: a tree that grew past it is not followed.
          if (++count_ > kMaxIndexed) {
            drop(fmt::format("its tree grew past {} cgroups", kMaxIndexed));
            wholeLeft_ = kWholeWalksAfterRefusal;  // whole walks refuse it before opening it
            return tooMany();
          }
        }
        if (made || everything) n.toWalk.insert(name);
      }
      n.relist = false;
    }
    n.seen = true;
    const bool quiet = n.populated == false && !n.lingering && n.toWalk.empty();
    if (quiet && n.parent) n.parent->toWalk.erase(n.name);  // skipped until a notice
    if (n.toWalk.empty()) continue;
    if (walk.visited + stack.size() + n.toWalk.size() > limits.maxCgroups) return tooMany();
    if (p.depth + 1 > limits.maxDepth) {
      walk.tooDeep = true;
      return treewalk::tooDeep(cg_.path(), limits.maxDepth);
    }
    for (auto c = n.toWalk.rbegin(); c != n.toWalk.rend(); ++c) {  // popped in name order
      auto child = n.children.find(*c);
      if (child == n.children.end()) continue;
      stack.push_back({dir, child->second.get(), treewalk::childPath(p.path, *c), p.depth + 1});
    }
  }
  if (everything) recheck_ = false;
  return out;
}

}  // namespace tally::cgroup
