// A controller along the path from the cgroup v2 root down to a cgroup: is it
// available at each level (cgroup.controllers) and enabled for the level's
// children (cgroup.subtree_control)? What `tally doctor` shows for memory
// and dmem, with the evidence of every level.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "fs/root.h"

namespace tally::cgroup {

struct ChainLevel {
  std::string cgroup;
  bool available = false;                  // in its cgroup.controllers
  std::optional<bool> enabledForChildren;  // in its cgroup.subtree_control (absent: unreadable)
  std::string evidence;                    // what was read, where
};

struct Chain {
  std::vector<ChainLevel> levels;  // the existing ones, from the root down
  bool availableAtEnd = false;     // in the last existing level's cgroup.controllers
  bool enabledAll = true;          // in every existing level's cgroup.subtree_control
  bool reachedTarget = false;      // `target` itself exists
};

// Stops at the first level that does not exist yet (systemd makes tally.slice on first use).
Chain controllerChain(const fs::Root& cgroupRoot, const std::string& target,
                      const std::string& controller);

}  // namespace tally::cgroup
