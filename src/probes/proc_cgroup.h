// Parsers for /proc/<pid>/cgroup: the cgroup v2 membership ("0::<path>"), on
// pure v2 and on hybrid hosts (where v1 lines precede it); and for
// /proc/cgroups: the controllers the kernel was built with.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tally::probes {

struct ProcCgroup {
  std::string path;               // as printed, without " (deleted)"
  bool deleted = false;           // the cgroup was removed (zombie in a removed cgroup)
  bool outsideNamespace = false;  // path climbs with "/.." out of the reader's cgroup namespace
};

// nullopt when there is no well-formed "0::" line (a pure cgroup v1 host).
std::optional<ProcCgroup> parseProcCgroup(std::string_view text);

// One line of /proc/cgroups: "#subsys_name\thierarchy\tnum_cgroups\tenabled".
struct CgroupController {
  std::string name;
  std::uint64_t hierarchy = 0;  // 0: on cgroup v2 (or not mounted)
  std::uint64_t numCgroups = 0;
  bool enabled = false;
};
// Every well-formed controller line; the header and malformed lines are skipped.
std::vector<CgroupController> parseProcCgroups(std::string_view text);

}  // namespace tally::probes
