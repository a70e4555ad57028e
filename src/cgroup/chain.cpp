#include "cgroup/chain.h"

#include <fmt/format.h>

#include "cgroup/cgroup.h"
#include "util/text.h"

namespace tally::cgroup {

Chain controllerChain(const fs::Root& cgroupRoot, const std::string& target,
                      const std::string& controller) {
  Chain c;
  std::vector<std::string> levels{"/"};
  for (std::size_t i = 1; i <= target.size(); ++i) {
    if ((i == target.size() || target[i] == '/') && i > 1) levels.push_back(target.substr(0, i));
  }
  for (const auto& level : levels) {
    auto cg = Cgroup::open(cgroupRoot, level);
    if (!cg) break;
    auto controllers = cg->read(file::kControllers, 4096);
    if (!controllers) break;  // not a cgroup (yet)
    auto subtree = cg->read(file::kSubtreeControl, 4096);
    ChainLevel l;
    l.cgroup = level;
    l.available = text::hasWord(text::trim(*controllers), controller);
    if (subtree) l.enabledForChildren = text::hasWord(text::trim(*subtree), controller);
    l.evidence = fmt::format("{} = \"{}\"; {} = \"{}\"", cg->describe(file::kControllers),
                             text::trim(*controllers), file::kSubtreeControl,
                             subtree ? std::string(text::trim(*subtree)) : "unreadable");
    c.availableAtEnd = l.available;
    c.reachedTarget = level == target;
    c.enabledAll = c.enabledAll && l.enabledForChildren.value_or(false);
    c.levels.push_back(std::move(l));
  }
  if (c.levels.empty()) c.enabledAll = false;
  return c;
}

}  // namespace tally::cgroup
