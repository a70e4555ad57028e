// Parser for /proc/<pid>/cgroup: the cgroup v2 membership ("0::<path>"), on
// pure v2 and on hybrid hosts (where v1 lines precede it).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tally::probes {

struct ProcCgroup {
  std::string path;               // as printed, without " (deleted)"
  bool deleted = false;           // the cgroup was removed (zombie in a removed cgroup)
  bool outsideNamespace = false;  // path climbs with "/.." out of the reader's cgroup namespace
};

// nullopt when there is no well-formed "0::" line (a pure cgroup v1 host).
std::optional<ProcCgroup> parseProcCgroup(std::string_view text);

}  // namespace tally::probes
