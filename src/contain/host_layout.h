// What this host offers for containment: is PID 1 systemd, is the cgroup root
// a v2 root, where does the memory controller live. Shared by `tally doctor`
// (which reports it) and `tally run` (whose refusals quote it).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "fs/root.h"

namespace tally::contain {

struct HostLayout {
  std::string kernel;
  std::string pid1;  // /proc/1/comm
  bool systemd = false;
  bool v2Root = false;      // the cgroup root has cgroup.controllers
  std::string controllers;  // of the v2 root
  std::string v2RootEvidence;
  bool memoryOnV2 = false;
  std::vector<std::string> v2Mounts;
  std::vector<std::string> memoryV1Mounts;
  // Each reason a lease cannot be contained, e.g. "no systemd (PID 1 is
  // process_api)", "memory controller is on cgroup v1". Empty when it can.
  std::vector<std::string> problems;
  bool containable() const { return problems.empty(); }
  std::string memoryController() const;  // "cgroup v2", "cgroup v1", "absent"
};

// /proc/sys/kernel/osrelease ("" when unreadable).
std::string kernelRelease(const fs::Root& proc);

// `cgroupRoot` absent: it could not be opened (`cgroupError` says why).
HostLayout readHostLayout(const fs::Root& proc, const fs::Root* cgroupRoot,
                          const std::string& cgroupError);

}  // namespace tally::contain
