// A cgroup v2 directory held open. Every file of it is read and written
// relative to that fd (oomd's DirFd): a cgroup removed and re-created under
// the same name is never read through a stale name, and what a client named
// is what was opened (no symlink is followed on the way: fs::Root::openDirBeneath).
// The kernel's file names live here and only here (Documentation/admin-guide/
// cgroup-v2.rst); parts elsewhere ask typed questions: memoryPeak(),
// populated(), kill().
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fs/root.h"
#include "probes/cgroup_memory.h"
#include "util/result.h"

namespace tally::cgroup {

// The interface files tally reads or writes.
namespace file {
inline constexpr const char* kControllers = "cgroup.controllers";
inline constexpr const char* kSubtreeControl = "cgroup.subtree_control";
inline constexpr const char* kEvents = "cgroup.events";
inline constexpr const char* kProcs = "cgroup.procs";
inline constexpr const char* kKill = "cgroup.kill";
inline constexpr const char* kMemoryCurrent = "memory.current";
inline constexpr const char* kMemoryPeak = "memory.peak";
inline constexpr const char* kMemoryMax = "memory.max";
inline constexpr const char* kMemoryHigh = "memory.high";
inline constexpr const char* kMemorySwapMax = "memory.swap.max";
inline constexpr const char* kMemorySwapPeak = "memory.swap.peak";
inline constexpr const char* kMemoryEvents = "memory.events";
inline constexpr const char* kMemoryStat = "memory.stat";
inline constexpr const char* kMemoryOomGroup = "memory.oom.group";
inline constexpr const char* kDmemCapacity = "dmem.capacity";
inline constexpr const char* kDmemCurrent = "dmem.current";
inline constexpr const char* kDmemMax = "dmem.max";
inline constexpr const char* kDmemMemcg = "dmem.memcg";
}  // namespace file

// Bounds on a walk of a cgroup's subtree: a user can make her own cgroup
// tree as deep and wide as she likes (mkdir needs no privilege below a
// delegated cgroup); no walk tally makes follows her further than this.
struct SubtreeLimits {
  std::size_t maxDepth = 64;        // levels below the cgroup itself
  std::size_t maxCgroups = 16'384;  // directories visited, the cgroup included
};

// How far a subtree walk went: the directories it opened, and whether it
// stopped at the limit on cgroups (tooMany) or on depth (tooDeep).
struct SubtreeWalk {
  std::size_t visited = 0;
  bool tooMany = false;
  bool tooDeep = false;
};

// The processes of a subtree, each with the cgroup it was listed in.
struct SubtreeProc {
  pid_t pid = 0;
  std::string cgroup;  // path from the cgroup v2 root, as Cgroup::path() names it
};

class Cgroup {
 public:
  // `path` from the cgroup v2 root ("/" is the root itself), opened below
  // `root` without following any symlink.
  static Result<Cgroup> open(const fs::Root& root, std::string_view path);

  const std::string& path() const { return path_; }
  // The held directory, for walks below it (never closed by the caller).
  int dirFd() const { return dir_.fd(); }
  std::uint64_t inode() const { return static_cast<std::uint64_t>(stat_.st_ino); }
  uid_t owner() const { return stat_.st_uid; }
  // "<root>/<path>/<file>" for messages.
  std::string describe(std::string_view file) const { return dir_.describe(file); }

  // Whole files, for the parsers and for messages that quote them.
  Result<std::string> read(const char* file, std::size_t limit = 64 * 1024) const {
    return dir_.read(file, limit);
  }
  // fstatat of one of its files, without following a symlink.
  Result<struct stat> statFile(const char* file) const { return dir_.lstat(file); }

  Result<std::uint64_t> memoryCurrent() const { return bytes(file::kMemoryCurrent); }
  Result<std::uint64_t> memoryPeak() const { return bytes(file::kMemoryPeak); }
  Result<std::uint64_t> swapPeak() const { return bytes(file::kMemorySwapPeak); }
  Result<probes::MemoryLimit> memoryMax() const { return limit(file::kMemoryMax); }
  Result<probes::MemoryLimit> memoryHigh() const { return limit(file::kMemoryHigh); }
  Result<probes::MemoryLimit> memorySwapMax() const { return limit(file::kMemorySwapMax); }
  // memory.oom.group: 0 or 1.
  Result<bool> oomGroup() const;
  Result<probes::FlatKeyed> memoryEvents() const { return flat(file::kMemoryEvents); }
  Result<probes::FlatKeyed> memoryStat() const { return flat(file::kMemoryStat); }
  // cgroup.events "populated". A cgroup removed under the handle reads false
  // (nothing runs there any more).
  Result<bool> populated() const;
  // cgroup.procs; a removed cgroup has none.
  Result<std::vector<pid_t>> procs() const;
  // cgroup.procs of this cgroup and every descendant, read through the held
  // directory (never by path): iterative, depth-first in name order, within
  // `limits`. A cgroup removed under the handle is an error (ENOENT: it is
  // gone, and one re-created under its name is another cgroup); past a limit,
  // an error that names it (E2BIG). A child removed mid-walk is simply gone.
  // `walk`, when given, says how far the walk went and which limit stopped it.
  Result<std::vector<SubtreeProc>> subtreeProcs(const SubtreeLimits& limits = {},
                                                SubtreeWalk* walk = nullptr) const;
  // Whether `controller` is in cgroup.controllers (available here), and in
  // cgroup.subtree_control (enabled for its children).
  Result<bool> hasController(std::string_view controller) const;
  Result<bool> delegates(std::string_view controller) const;

  // cgroup.kill: SIGKILL to every process below, atomically (Linux 5.14+).
  Status kill() const { return dir_.write(file::kKill, "1"); }
  Status setMemoryMax(std::uint64_t bytes) const {
    return dir_.write(file::kMemoryMax, std::to_string(bytes));
  }
  Status setMemoryHigh(std::uint64_t bytes) const {
    return dir_.write(file::kMemoryHigh, std::to_string(bytes));
  }
  Status setMemorySwapMax(std::uint64_t bytes) const {
    return dir_.write(file::kMemorySwapMax, std::to_string(bytes));
  }
  Status setOomGroup(bool on) const { return dir_.write(file::kMemoryOomGroup, on ? "1" : "0"); }
  Status addProcess(pid_t pid) const { return dir_.write(file::kProcs, std::to_string(pid)); }

 private:
  Cgroup(fs::Root dir, std::string path, struct stat st)
      : dir_(std::move(dir)), path_(std::move(path)), stat_(st) {}
  Result<std::uint64_t> bytes(const char* file) const;
  Result<probes::MemoryLimit> limit(const char* file) const;
  Result<probes::FlatKeyed> flat(const char* file) const;

  fs::Root dir_;
  std::string path_;
  struct stat stat_;
};

// A lease's final counters: memory.peak, memory.swap.peak, memory.events and
// memory.stat, each absent with the reason when unreadable.
struct FinalCounters {
  std::string cgroup;  // where they were read (the lease slice, or the lease cgroup)
  std::optional<std::uint64_t> memoryPeak;
  std::optional<std::string> memoryPeakUnknown;
  std::optional<std::uint64_t> swapPeak;
  std::optional<probes::FlatKeyed> events;
  std::optional<std::string> eventsUnknown;
  // memory.stat at the end: its cumulative event counters (faults, reclaim,
  // refaults, swap-ins) are hierarchical and survive the scope, unlike the
  // sizes, which are ~0 once the workload is gone.
  std::optional<probes::FlatKeyed> stat;
  // Set when these were read before the lease ended because its cgroup was
  // gone by then (systemd removes a stopped unit's): when, and at what.
  std::uint64_t readBeforeEndAtNs = 0;
  std::optional<std::string> readBeforeEnd;
  bool eventsReadBeforeEnd = false;  // memory.events is among them (readBeforeEnd says when)
};
FinalCounters readFinalCounters(const Cgroup& cg);
// The same, opening `cgroup` below the root first (absent with the reason when it is gone).
FinalCounters readFinalCounters(const fs::Root& cgroupRoot, const std::string& cgroup);
// A set read as the cgroup was being removed may hold some files and not
// others (memory.events read, memory.peak gone a moment later). The files `c`
// lacks are taken from `earlier`, read while the cgroup was whole: counters
// and peaks only grow, so a figure filled in is a floor, never more than was
// used. Returns the files filled in.
std::vector<std::string> fillUnread(FinalCounters& c, const FinalCounters& earlier);

}  // namespace tally::cgroup
