// The two reference scanners tally is measured against (bench only):
//  - floor: only the irreducible syscalls of a host-wide DRM scan: list the
//    proc root, getdents each <pid>/fd, one fstatat per fd, and open+read+close
//    of each DRM fd's fdinfo. No parsing, no metadata, no bookkeeping.
//  - naive: what a straightforward tool does: read *every* fdinfo through
//    buffered streams line by line, keeping the drm- lines.
#pragma once

#include <cstdint>
#include <string>

namespace tally::bench {

struct FloorResult {
  std::uint64_t pids = 0, fds = 0, drmFds = 0, bytes = 0;
};

FloorResult floorScan(int procFd);
// The same irreducible syscalls for one cgroup's processes (a lease's sample):
// read <cgroup>/cgroup.procs, then per pid what floorScan does.
FloorResult cgroupFloorScan(int procFd, int cgroupDirFd);
FloorResult naiveScan(const std::string& procRoot);

}  // namespace tally::bench
