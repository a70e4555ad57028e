// Which manager creates a lease's cgroup: the one asked for, or (auto) the
// system manager for root, the user manager otherwise, and a delegated cgroup
// v2 subtree when no systemd manager answers. A refusal names every reason.
#pragma once

#include <memory>
#include <string>

#include "contain/host_layout.h"
#include "contain/lease_cgroup.h"
#include "fs/root.h"
#include "lease/spec.h"

namespace tally::contain {

struct Choice {
  std::unique_ptr<LeaseCgroup> lease;  // null: refused
  std::string refusal;                 // why, when refused
  std::string note;                    // e.g. "no systemd manager; using the delegated subtree /x"
};

Choice chooseContainment(const lease::LeaseSpec& spec, const fs::Root& proc,
                         const fs::Root* cgroupRoot, const HostLayout& layout);

}  // namespace tally::contain
