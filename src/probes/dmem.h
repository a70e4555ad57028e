// The dmem cgroup controller's files (kernel/cgroup/dmem.c): dmem.capacity
// (root only) and dmem.current, "<region> <bytes>" per line, region names
// "drm/<bdf>/<name>" (KERNEL-FACTS §3.2-3.3). Pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tally::probes {

struct DmemRegion {
  std::string name;  // "drm/0000:c6:00.0/vram"
  std::uint64_t bytes = 0;
};

// nullopt when a line is not "<region> <bytes>" (dmem.max's "max" included:
// capacity and current are always byte counts).
std::optional<std::vector<DmemRegion>> parseDmemCapacity(std::string_view text);

}  // namespace tally::probes
