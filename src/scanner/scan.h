// The scanner: which processes hold which DRM clients, read from /proc (and
// KFD from /sys), with every client counted once. Two scopes: the whole host,
// and the processes of one cgroup subtree (what a lease's meter calls every
// second). The result is a passive struct; aggregation lives in report/.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "cgroup/cgroup.h"
#include "cgroup/tree_watch.h"
#include "devices/drm_devices.h"
#include "fs/root.h"
#include "probes/drm_fdinfo.h"
#include "scanner/kfd.h"
#include "util/unique_fd.h"

namespace tally::scanner {

struct FdHolder {
  pid_t pid = 0;
  int fd = -1;
};

// One DRM client (one struct drm_file), however many fds and processes hold it.
struct Client {
  std::uint32_t major = devices::kDrmMajor;  // or kAccelMajor: an NPU's /dev/accel node
  std::uint32_t minor = 0;
  std::optional<std::size_t> device;  // index into Scan::devices.devices
  probes::DrmFdinfo info;             // as read from the first holder's fdinfo
  std::vector<FdHolder> holders;      // every (pid, fd), sorted
  pid_t owner = 0;                    // the one process the client is charged to
  bool sharedAcrossProcesses = false;
  bool sharedAcrossCgroups = false;
  // No drm-client-id (5.14 amdgpu format): the client cannot be told apart
  // from another fd's, so it is counted once per fd and flagged.
  bool undeduplicated = false;
};

struct KfdVram {
  std::uint64_t gpuId = 0;
  std::optional<std::uint64_t> context;  // a secondary KFD context; absent: the primary
  std::optional<std::string> pdev;       // from the KFD topology, when it maps
  std::uint64_t bytes = 0;
};

struct Process {
  pid_t pid = 0;
  std::uint64_t startTimeTicks = 0;  // with pid: identity across PID reuse
  std::optional<std::string> comm;
  std::vector<std::uint64_t> nspid;  // outermost first
  std::optional<std::uint32_t> uid;
  std::optional<std::string> cgroup;               // cgroup v2 path (relative to the cgroup root)
  std::optional<std::string> cgroupUnknownReason;  // why `cgroup` is absent
  bool cgroupDeleted = false;
  // The path climbs out of the reader's cgroup namespace ("/../.."): tally is
  // not running in the host's cgroup namespace, so the path is relative.
  bool cgroupOutsideNamespace = false;
  std::vector<std::size_t> clients;  // indices into Scan::clients this process holds
  bool holdsKfd = false;             // has /dev/kfd open
  std::vector<KfdVram> kfdVram;      // /sys/class/kfd/kfd/proc/<pid>/vram_<gpuid>
};

struct Unreadable {
  pid_t pid = 0;
  std::string reason;
};

struct Scan {
  std::uint64_t observedAtNs = 0;  // CLOCK_REALTIME when the scan began
  devices::DeviceMap devices;
  std::vector<Process> processes;  // only processes holding DRM or KFD; sorted by pid
  std::vector<Client> clients;
  std::vector<Unreadable> unreadable;      // sorted by pid
  std::optional<std::string> scopeCgroup;  // set for a cgroup-scoped scan
};

struct ScanStats {
  std::uint64_t pidsVisited = 0;
  std::uint64_t fdsStatted = 0;
  std::uint64_t drmFds = 0;
  // Listed, then gone before they were read whole: dropped, not reported as
  // unreadable (an exit is not an error) and never half-reported.
  std::uint64_t pidsVanished = 0;
  // Threads whose fd table is not their leader's, walked as well.
  std::uint64_t threadTables = 0;
  // How far a cgroup-scoped scan's subtree walk went.
  cgroup::SubtreeWalk walk;
};

// The processes one meter saw at its last sample, held open across samples:
// /proc/<pid> as a directory fd, its fd directory, and the metadata (start
// time, comm, NSpid, uid) read once. A held /proc/<pid> is the process, not
// the number: once it exits, procfs fails every read through it, and a new
// process that reuses the pid has another /proc/<pid> inode, which is checked
// (one fstatat) before anything held is trusted. So a reused pid is never
// metered as the old process. Entries for pids gone from the scope are closed.
struct ProcHandles {
  struct Held {
    UniqueFd pidDir, fdDir;
    ino_t ino = 0;  // of the /proc/<pid> directory held
    bool metadataRead = false;
    Process metadata;  // pid, startTimeTicks, comm, nspid, uid
    std::uint64_t generation = 0;
  };
  std::unordered_map<pid_t, Held> held;
  std::uint64_t generation = 0;  // the scan that last saw a held process
  // Two fds per held process: past this many, a lease's further processes are
  // read through fresh opens (as a host scan does), and so is any process
  // when the daemon is out of fds: holding is a saving, never a limit.
  std::size_t maxHeld = 1024;
  int procfs = -1;  // whether the proc root is procfs: -1 until the first scan asks
};

// Where a process can exit under a scan. A seam for tests: the hook runs at
// each point, so a test can make a process exit exactly there.
enum class ScanPoint {
  Listed,     // candidates are known, no process has been read yet
  FdsWalked,  // this pid's fds were walked; its fdinfo and metadata are next
};

class Scanner {
 public:
  Scanner(const fs::Root& proc, const fs::Root& sys) : proc_(proc), sys_(sys) {}

  // Every process in the proc root. The cgroup of DRM holders comes from
  // /proc/<pid>/cgroup.
  Result<Scan> scanHost();

  // The processes of a held cgroup and its descendants, listed through its
  // directory fd (cgroup::Cgroup::subtreeProcs: bounded, never by path);
  // each process's cgroup is the directory it was listed in. A cgroup
  // removed under the handle is an error, never an empty lease.
  // `limits`: how far the subtree walk may go (the daemon's per-user budget
  // of cgroups walked); stats().cgroupsWalked says how far it went.
  Result<Scan> scanCgroup(const cgroup::Cgroup& cg, const cgroup::SubtreeLimits& limits = {});
  // The same for `path` (relative to `cgroupRoot`), opened first (tally gpu --cgroup).
  Result<Scan> scanCgroup(const fs::Root& cgroupRoot, std::string_view path);

  const ScanStats& stats() const { return stats_; }

  // A host snapshot's devices and KFD index (not read again here), and a
  // meter's held process handles (reused and updated); all optional, all
  // outlive the scan. scanHost() uses no handles.
  void useHost(const devices::DeviceMap* devices, KfdIndex* kfd) {
    devices_ = devices;
    kfd_ = kfd;
  }
  void useHandles(ProcHandles* handles) { handles_ = handles; }
  // A lease's tree as inotify follows it (cgroup/tree_watch.h): scanCgroup
  // then reads cgroup.procs only where something runs. Outlives the scan.
  void useIndex(cgroup::SubtreeIndex* index) { index_ = index; }

  using Hook = std::function<void(ScanPoint, pid_t)>;
  void setHookForTests(Hook hook) { hook_ = std::move(hook); }

 private:
  struct Candidate {
    pid_t pid;
    std::optional<std::string> cgroup;  // known up front in a cgroup scan
  };
  Result<Scan> run(const std::vector<Candidate>& candidates, bool readCgroupFile,
                   ProcHandles* handles);

  const fs::Root& proc_;
  const fs::Root& sys_;
  const devices::DeviceMap* devices_ = nullptr;
  KfdIndex* kfd_ = nullptr;
  ProcHandles* handles_ = nullptr;
  cgroup::SubtreeIndex* index_ = nullptr;
  ScanStats stats_;
  Hook hook_;
};

// The documented owner rule: a client held by several processes is charged to
// the holder that started first (smallest start time), ties to the lowest PID.
// The opener of a client is necessarily alive before any process it forks or
// passes the fd to, so the oldest holder is the best available guess at the
// opener; the rule is deterministic either way.
void assignOwners(Scan& scan);

// Sorts holders, clients (by minor, client id, first holder), each process's
// client list and the processes, so a host state always gives one document.
void canonicalise(Scan& scan);

}  // namespace tally::scanner
