// Where this host's leases live: under the systemd manager that creates them
// (the system manager's tally.slice for root, the user manager's for others),
// or, without systemd, beside tally's own cgroup in its parent (a delegated
// subtree). One rule, used by `tally run` to create leases and by `tally
// doctor` to say where they will be.
#pragma once

#include <sys/types.h>

#include <string>

namespace tally::contain {

struct LeasePlacement {
  std::string managerRoot;  // the cgroup whose manager creates leases
  std::string leaseParent;  // where lease cgroups appear
};

// `ownCgroup`: tally's own cgroup (/proc/self/cgroup); `slice`: the lease
// slice under a systemd manager ("tally.slice").
LeasePlacement leasePlacement(bool systemd, uid_t uid, const std::string& ownCgroup,
                              const std::string& slice = "tally.slice");

// Without systemd, lease cgroups are siblings of tally's own cgroup: cgroup
// v2 allows no controllers in a cgroup with processes, so not inside it.
std::string cgroupfsParent(const std::string& ownCgroup);

}  // namespace tally::contain
