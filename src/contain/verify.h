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

#include "fs/root.h"
#include "lease/spec.h"
#include "probes/cgroup_memory.h"
#include "util/result.h"

namespace tally::contain {

// What the lease's memory files should read.
struct ExpectedLimits {
  std::optional<std::uint64_t> memoryMax;  // nullopt: must read "max"
  std::optional<std::uint64_t> memoryHigh;
  std::optional<std::uint64_t> memorySwapMax;
  bool oomGroup = false;
};
ExpectedLimits expectedLimits(const lease::LeaseSpec& spec);

// What was read back, for the outcome record.
struct AppliedLimits {
  probes::MemoryLimit memoryMax, memoryHigh;
  std::optional<probes::MemoryLimit> memorySwapMax;  // absent without swap accounting
  bool oomGroup = false;
};

// The kernel stores limits in pages: a declared byte count reads back rounded
// to a page boundary (down when written by systemd through the kernel's
// page_counter_memparse). Either neighbouring boundary is accepted; anything
// else is a mismatch.
bool limitMatches(const std::optional<std::uint64_t>& declared, const probes::MemoryLimit& read, std::uint64_t pageSize);

// Reads memory.max/high/swap.max and memory.oom.group of `cgroup` (relative
// to the cgroup root) and compares them with `expected`. A missing memory.max
// means the memory controller is not enabled for the cgroup; `delegationHint`
// is appended to that message (who should delegate it).
Result<AppliedLimits> verifyLimits(const fs::Root& cgroupRoot, std::string_view cgroup, const ExpectedLimits& expected,
                                   std::uint64_t pageSize, std::string_view delegationHint);

// /proc/<pid>/cgroup names exactly `cgroup`.
Status verifyMembership(const fs::Root& proc, pid_t pid, std::string_view cgroup);

}  // namespace tally::contain
