// One lease from start to recorded outcome: fork the workload held, place it
// in its cgroup, read the containment back, release it, meter it while it
// runs, stop it on SIGINT/SIGTERM/SIGHUP, read the final counters, classify.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "contain/lease_cgroup.h"
#include "fs/root.h"
#include "lease/record.h"
#include "lease/spec.h"

namespace tally::run {

using lease::LeaseRecord;
using lease::LeaseSpec;

// A daemon client follows the lease (tally run --pool): it is told when the
// lease's cgroup is verified (before the workload is released; an error
// refuses the lease) and when the outcome is known (before the cgroup is
// removed, so the daemon can read the final counters too).
class LeaseObserver {
 public:
  virtual ~LeaseObserver() = default;
  virtual Status placed(const LeaseRecord& rec, const contain::LeaseCgroup& lease) = 0;
  virtual void finished(LeaseRecord& rec) = 0;
  // The GPU bound noticed or did something (already in rec.gpuBound).
  virtual void bound(const enforce::BoundEvent&) {}
};

struct RunEnv {
  const fs::Root& proc;
  const fs::Root& sys;
  const fs::Root* cgroupRoot = nullptr;  // null: could not be opened
  int signalFd = -1;  // signalfd for SIGINT, SIGTERM, SIGHUP (blocked by the caller)
  std::uint64_t pageSize = 4096;
  LeaseObserver* observer = nullptr;
  // Called once the lease is placed and verified, just before the workload
  // is released (the start line; absent: nothing is said).
  std::function<void(const LeaseRecord&)> onStart;
};

// `lease` null means containment was refused before anything was created;
// `refusal` says why. The workload is forked only once a lease exists.
LeaseRecord runLease(const LeaseSpec& spec, const RunEnv& env, contain::LeaseCgroup* lease,
                     const std::string& refusal);

}  // namespace tally::run
