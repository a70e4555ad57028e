// A lease's cgroup, however it was made: a transient systemd scope in its own
// slice, or a cgroup tally created in a delegated cgroup v2 subtree. The
// runner drives either through this seam, and tests observe it.
#pragma once

#include <sys/types.h>

#include <string>

#include "util/result.h"

namespace tally::contain {

class LeaseCgroup {
 public:
  virtual ~LeaseCgroup() = default;

  virtual const char* manager() const = 0;    // "system", "user", "cgroupfs"
  virtual std::string unitName() const = 0;   // "tally-<id>.scope", or "" for cgroupfs
  virtual std::string sliceName() const = 0;  // "tally-<id>.slice", or "" for cgroupfs

  // Creates the cgroup with `pid` inside and applies the declared limits.
  // Returns once the kernel has the process there (systemd: the job is done).
  virtual Status place(pid_t pid) = 0;

  // The lease's cgroup (relative to the cgroup v2 root), known after place().
  virtual const std::string& cgroup() const = 0;
  // Where the lease's final counters survive the end of the workload: the
  // lease's own slice (systemd removes a stopped scope's cgroup at once), or
  // the lease cgroup itself (cgroupfs, removed only by release()).
  virtual const std::string& countersCgroup() const = 0;
  // Appended to "memory controller not enabled" refusals: who must delegate it.
  virtual std::string delegationHint() const = 0;

  // Terminates every process of the lease: SIGTERM, then SIGKILL after a grace.
  virtual Status stop() = 0;
  // SIGKILL to every process of the lease, now.
  virtual Status killAll() = 0;
  // After the main process ended: ends whatever is left in the lease and waits
  // until its cgroup is empty, so the counters are final.
  virtual Status endWorkload() = 0;
  // After the final counters were read: removes the slice / cgroup.
  virtual Status release() = 0;
};

}  // namespace tally::contain
