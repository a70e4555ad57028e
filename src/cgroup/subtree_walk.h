// What the two walks of a cgroup subtree share (Cgroup::subtreeProcs, the
// whole walk; SubtreeIndex::procs, the one that skips what is empty): their
// refusals and how a cgroup.procs line becomes a process. Internal to cgroup/.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "cgroup/cgroup.h"
#include "util/result.h"

namespace tally::cgroup::treewalk {

// The refusals, each naming the limit it met.
Error tooMany(const std::string& top, std::size_t maxCgroups);
Error tooDeep(const std::string& top, std::size_t maxDepth);
// The cgroup itself is gone (ENOENT reading its cgroup.procs).
Error gone(const std::string& top);
// Every pid of `procs` (cgroup.procs' text), listed in `path`.
void appendPids(std::string_view procs, const std::string& path, std::vector<SubtreeProc>& out);
// `parent`/`name` as a path from the cgroup root ("/" joins without doubling).
std::string childPath(const std::string& parent, std::string_view name);

}  // namespace tally::cgroup::treewalk
