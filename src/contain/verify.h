// Read-back of a lease's containment before the workload may exec: the held
// child sits in the expected cgroup, and that cgroup's memory files say what
// was declared — and nothing that was not (doctrine 2 and 3).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cgroup/cgroup.h"
#include "cgroup/limits.h"
#include "fs/root.h"
#include "lease/spec.h"
#include "util/result.h"

namespace tally::contain {

// What a lease spec declares its cgroup must read.
cgroup::ExpectedLimits expectedLimits(const lease::LeaseSpec& spec);

// Reads the cgroup's memory limits (max, high, swap.max, oom.group) and
// compares them with `expected`, page rounding allowed
// (cgroup::limitMatches). A missing memory.max means the memory controller
// is not enabled for the cgroup; `delegationHint` is appended to that message
// (who should delegate it). The one read-back of a lease's limits, for a run
// lease before its workload execs and for an attached workload at adoption.
Result<cgroup::AppliedLimits> verifyLimits(const cgroup::Cgroup& cg,
                                           const cgroup::ExpectedLimits& expected,
                                           std::uint64_t pageSize, std::string_view delegationHint);

// /proc/<pid>/cgroup names exactly `cgroup`.
Status verifyMembership(const fs::Root& proc, pid_t pid, std::string_view cgroup);

}  // namespace tally::contain
