// A lease as a cgroup tally creates itself, for hosts where no systemd
// manager answers but a cgroup v2 subtree with the memory controller is
// delegated to tally (a container with its own cgroup namespace, a unit with
// Delegate=yes). Same verification as a systemd scope; no slice needed, since
// tally removes the cgroup itself after reading its final counters.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "cgroup/cgroup.h"
#include "contain/lease_cgroup.h"
#include "fs/root.h"
#include "lease/spec.h"

namespace tally::contain {

// Where lease cgroups may be created: an existing cgroup v2 directory with the
// memory controller in its cgroup.subtree_control and writable by tally.
// `parent` is relative to the cgroup root.
Status checkDelegatedParent(const fs::Root& cgroupRoot, const std::string& parent);

// The default parent: the cgroup tally itself runs in is busy with processes
// (cgroup v2 allows no controllers there), so lease cgroups become siblings of
// it, in its parent, when that parent is a delegated one.
Result<std::string> defaultCgroupParent(const fs::Root& proc, const fs::Root& cgroupRoot);

class CgroupfsLease final : public LeaseCgroup {
 public:
  CgroupfsLease(const fs::Root& cgroupRoot, std::string parent, const lease::LeaseSpec& spec);

  const char* manager() const override { return "cgroupfs"; }
  std::string unitName() const override { return ""; }
  std::string sliceName() const override { return ""; }
  Status place(pid_t pid) override;
  const std::string& cgroup() const override { return cgroup_; }
  const std::string& countersCgroup() const override { return cgroup_; }
  std::string delegationHint() const override;
  Status stop() override;
  Status killAll() override;
  Status endWorkload() override;
  Status release() override;

 private:
  Status waitEmpty(std::uint64_t timeoutUs);
  Status signalAll(int sig);  // every process of the lease's cgroup
  const fs::Root& root_;
  std::optional<cgroup::Cgroup> cg_;  // held open once created
  std::string parent_;
  const lease::LeaseSpec& spec_;
  std::string cgroup_;  // "/<parent>/tally-<id>"
  std::string rel_;     // the same, relative (no leading slash)
  bool created_ = false;
  bool ended_ = false;  // endWorkload() emptied it
};

}  // namespace tally::contain
