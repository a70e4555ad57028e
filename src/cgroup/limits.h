// A cgroup's memory limits as declared and as read back. Pure.
#pragma once

#include <cstdint>
#include <optional>

#include "probes/cgroup_memory.h"

namespace tally::cgroup {

// What a lease's memory files should read.
struct ExpectedLimits {
  std::optional<std::uint64_t> memoryMax;  // nullopt: must read "max"
  std::optional<std::uint64_t> memoryHigh;
  std::optional<std::uint64_t> memorySwapMax;
  bool oomGroup = false;
  // An adopted workload's limits are its own (set by whoever runs it): only
  // a declared memory.max is compared; the rest is read as found.
  bool onlyDeclared = false;
};

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
bool limitMatches(const std::optional<std::uint64_t>& declared, const probes::MemoryLimit& read,
                  std::uint64_t pageSize);

}  // namespace tally::cgroup
