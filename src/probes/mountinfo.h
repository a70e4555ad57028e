// Parser for /proc/<pid>/mountinfo: which filesystems are cgroup (v1) and
// cgroup2 mounts, and where. Pure.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tally::probes {

struct Mount {
  std::string mountPoint;    // octal escapes (\040) decoded
  std::string fsType;        // "cgroup2", "cgroup", "tmpfs", ...
  std::string superOptions;  // for cgroup v1: the controllers, e.g. "rw,memory"
};

std::vector<Mount> parseMountinfo(std::string_view text);

}  // namespace tally::probes
