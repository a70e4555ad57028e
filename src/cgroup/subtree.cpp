// Cgroup::subtreeProcs: the walk every meter makes of a lease's subtree.
// No recursion (a 1,500-level chain must not overflow the stack), each
// level's directory opened relative to its parent's fd, bounded in depth
// and in the directories visited.
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <memory>

#include "cgroup/cgroup.h"
#include "cgroup/subtree_walk.h"
#include "util/text.h"

namespace tally::cgroup {
namespace {

struct Pending {
  std::shared_ptr<UniqueFd> parent;  // null for the top: the held directory itself
  std::string name;                  // below `parent`
  std::string path;
  std::size_t depth = 0;
};

}  // namespace

namespace treewalk {

Error tooMany(const std::string& top, std::size_t maxCgroups) {
  return Error{E2BIG, fmt::format("the cgroup tree under {} has more than {} cgroups; tally "
                                  "does not walk trees that large",
                                  top, maxCgroups)};
}

Error tooDeep(const std::string& top, std::size_t maxDepth) {
  return Error{E2BIG, fmt::format("the cgroup tree under {} is deeper than {} levels; tally "
                                  "does not walk trees that deep",
                                  top, maxDepth)};
}

Error gone(const std::string& top) {
  return Error{ENOENT, fmt::format("cgroup {} is gone (removed; a cgroup made again under "
                                   "its name is another one)",
                                   top)};
}

void appendPids(std::string_view procs, const std::string& path, std::vector<SubtreeProc>& out) {
  text::LineReader lines(procs);
  while (auto l = lines.next())
    if (auto pid = text::parseU64(text::trim(*l)); pid && *pid > 0 && *pid < (1u << 30))
      out.push_back({static_cast<pid_t>(*pid), path});
}

std::string childPath(const std::string& parent, std::string_view name) {
  return parent == "/" ? "/" + std::string(name) : parent + "/" + std::string(name);
}

}  // namespace treewalk

Result<std::vector<SubtreeProc>> Cgroup::subtreeProcs(const SubtreeLimits& limits,
                                                      SubtreeWalk* walkOut) const {
  std::vector<SubtreeProc> out;
  std::vector<Pending> stack;
  stack.push_back({nullptr, ".", path_, 0});
  SubtreeWalk ownWalk;
  SubtreeWalk& walk = walkOut ? *walkOut : ownWalk;
  walk = {};
  std::size_t& visited = walk.visited;
  auto tooMany = [&] {
    walk.tooMany = true;
    return treewalk::tooMany(path_, limits.maxCgroups);
  };
  std::array<char, 8192> buf;
  std::string spill;
  while (!stack.empty()) {
    Pending p = std::move(stack.back());
    stack.pop_back();
    const bool top = !p.parent;
    auto dir =
        std::make_shared<UniqueFd>(::openat(top ? dir_.fd() : p.parent->get(), p.name.c_str(),
                                            O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
    if (!dir->valid()) {
      if (!top) continue;  // a child removed mid-walk is simply gone
      return errnoError(errno, "cannot open cgroup " + path_);
    }
    if (++visited > limits.maxCgroups) return tooMany();
    auto procs = fs::readAt(dir->get(), file::kProcs, buf, spill);
    if (!procs && top) {
      if (procs.error().code == ENOENT) return treewalk::gone(path_);
      return errnoError(procs.error().code, "cannot read " + describe(file::kProcs));
    }
    // A descendant whose cgroup.procs is gone mid-walk lists none; its own
    // children are still walked.
    treewalk::appendPids(procs ? *procs : std::string_view{}, p.path, out);
    std::vector<std::string> children;
    fs::forEachEntry(dir->get(), [&](std::string_view name, unsigned char type) {
      if (type == DT_DIR) children.emplace_back(name);
      return true;
    });
    if (children.empty()) continue;
    if (visited + stack.size() + children.size() > limits.maxCgroups) return tooMany();
    if (p.depth + 1 > limits.maxDepth) {
      walk.tooDeep = true;
      return treewalk::tooDeep(path_, limits.maxDepth);
    }
    // Pushed in reverse so the stack pops them in name order.
    std::sort(children.begin(), children.end(), std::greater<>());
    for (auto& c : children) {
      std::string path = treewalk::childPath(p.path, c);
      stack.push_back({dir, std::move(c), std::move(path), p.depth + 1});
    }
  }
  return out;
}

}  // namespace tally::cgroup
