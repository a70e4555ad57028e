#include "scanner/scan.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <tuple>
#include <unordered_map>

#include "cgroup/cgroup.h"
#include "probes/proc_cgroup.h"
#include "probes/proc_stat.h"
#include "probes/proc_status.h"
#include "scanner/kfd.h"
#include "util/clock.h"
#include "util/text.h"

namespace tally::scanner {
namespace {

// One fdinfo read: drm fdinfo is well under 2 KiB on every driver seen; 8 KiB
// leaves room for amdgpu's many regions and engines. Larger files spill.
constexpr std::size_t kFdinfoBuffer = 8192;

bool vanished(int err) { return err == ENOENT || err == ESRCH; }

std::string permissionReason(int err, const char* what, pid_t pid) {
  std::string r = std::string(what) + " of pid " + std::to_string(pid) + ": " + std::strerror(err);
  if (err == EACCES || err == EPERM)
    r += " (reading another user's or a container's fds needs root or CAP_SYS_PTRACE)";
  return r;
}

// An fd on a DRM or accel node, in the thread-group leader's table (tid 0)
// or in thread `tid`'s own.
struct DrmFd {
  int fd;
  std::uint32_t major, minor;
  pid_t tid = 0;
};

// What one process yielded before it is committed to the scan: a process that
// vanishes half-way is dropped whole, so no half-read process is ever reported.
struct Pending {
  Process process;
  std::vector<std::pair<int, probes::DrmFdinfo>> fdinfos;  // fd -> parsed
  std::vector<std::pair<std::uint32_t, std::uint32_t>>
      nodes;  // (major, minor), parallel to fdinfos
};

// One client, however many tables and fds hold it: by drm-client-id where the
// driver says it (a thread's own table, copied from the leader's by
// unshare(CLONE_FILES), holds the same clients), else by the process and fd
// number, whichever of its tables holds it: a copied table keeps the
// leader's numbers for the leader's files, so a copy is never counted twice
// (counting twice could kill a lease for memory it does not hold; an fd a
// thread opened under a number its leader opened another file under is
// the rarer miss, and only on a driver that prints no drm-client-id).
std::string clientKey(const probes::DrmFdinfo& info, std::uint32_t major, std::uint32_t minor,
                      pid_t pid, int fd) {
  std::string key =
      info.pdev ? *info.pdev : "node:" + std::to_string(major) + ":" + std::to_string(minor);
  if (info.clientId) return key + "#" + std::to_string(*info.clientId);
  return key + "#pid" + std::to_string(pid) + "fd" + std::to_string(fd);
}

}  // namespace

Result<Scan> Scanner::scanHost() {
  UniqueFd dir(::openat(proc_.fd(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir.valid()) return errnoError(errno, "cannot open " + proc_.path());
  std::vector<Candidate> candidates;
  int rc = fs::forEachEntry(dir.get(), [&](std::string_view name, unsigned char) {
    if (auto pid = text::parseU64(name); pid && *pid > 0 && *pid < (1u << 30))
      candidates.push_back({static_cast<pid_t>(*pid), std::nullopt});
    return true;
  });
  if (rc != 0) return errnoError(rc, "cannot list " + proc_.path());
  return run(candidates, true, nullptr);
}

Result<Scan> Scanner::scanCgroup(const fs::Root& cgroupRoot, std::string_view path) {
  // A lease names a cgroup below the root; ".." would read outside it.
  for (std::string_view rest = path; !rest.empty();) {
    auto slash = rest.find('/');
    if (rest.substr(0, slash) == "..")
      return Error{EINVAL,
                   "cgroup path " + std::string(path) + " climbs out of the cgroup root with '..'"};
    rest = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash + 1);
  }
  std::string display(path);
  while (display.size() > 1 && display.back() == '/') display.pop_back();
  if (display.empty() || display.front() != '/') display.insert(0, "/");
  auto cg = cgroup::Cgroup::open(cgroupRoot, display);
  if (!cg)
    return errnoError(cg.error().code,
                      "cannot read cgroup " + display + " under " + cgroupRoot.path() +
                          " (is --cgroup-root a cgroup v2 mount, and does the cgroup exist?)");
  return scanCgroup(*cg);
}

Result<Scan> Scanner::scanCgroup(const cgroup::Cgroup& cg, const cgroup::SubtreeLimits& limits) {
  cgroup::SubtreeWalk walked;
  auto found = index_ ? index_->procs(limits, &walked) : cg.subtreeProcs(limits, &walked);
  if (!found) {
    stats_ = {};
    stats_.walk = walked;
    return found.error();
  }
  std::vector<Candidate> candidates;
  candidates.reserve(found->size());
  for (auto& p : *found) candidates.push_back({p.pid, std::move(p.cgroup)});
  auto scan = run(candidates, false, handles_);
  stats_.walk = walked;
  if (scan) scan->scopeCgroup = cg.path();
  return scan;
}

namespace {

// Buffers reused across every read of one scan: one stack buffer for the
// single read() of each small file, a spill string for the rare larger one.
class ProcReader {
 public:
  explicit ProcReader(int procFd) : procFd_(procFd) {}

  Result<std::string_view> read(pid_t pid, const char* file) {
    std::snprintf(path_, sizeof path_, "%d/%s", pid, file);
    return fs::readAt(procFd_, path_, buf_, spill_);
  }
  // Through a held /proc/<pid> directory: no path walk, and never another process.
  Result<std::string_view> readIn(int pidDir, const char* file) {
    return fs::readAt(pidDir, file, buf_, spill_);
  }
  Result<std::string_view> readFdinfoIn(int pidDir, int fd, pid_t tid = 0) {
    if (tid)
      std::snprintf(path_, sizeof path_, "task/%d/fdinfo/%d", tid, fd);
    else
      std::snprintf(path_, sizeof path_, "fdinfo/%d", fd);
    return fs::readAt(pidDir, path_, buf_, spill_);
  }
  Result<std::string_view> readFdinfo(pid_t pid, int fd, pid_t tid = 0) {
    if (tid)
      std::snprintf(path_, sizeof path_, "%d/task/%d/fdinfo/%d", pid, tid, fd);
    else
      std::snprintf(path_, sizeof path_, "%d/fdinfo/%d", pid, fd);
    return fs::readAt(procFd_, path_, buf_, spill_);
  }
  int openTaskDir(pid_t pid) {
    std::snprintf(path_, sizeof path_, "%d/task", pid);
    return ::openat(procFd_, path_, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  }
  int openFdDir(pid_t pid) {
    std::snprintf(path_, sizeof path_, "%d/fd", pid);
    return ::openat(procFd_, path_, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  }

 private:
  int procFd_;
  std::array<char, kFdinfoBuffer> buf_;
  std::string spill_;
  char path_[64];
};

struct FdWalk {
  std::vector<DrmFd> drm;
  bool holdsKfd = false;
};

// One fstatat per fd (and, in walkThreadTables, one listing of its threads
// and a kcmp each); no other syscall for a process that holds no GPU device.
// procfs fills getdents64 greedily: one call lists a process's fds.
int walkFds(int fdDir, const std::optional<probes::DevNumber>& kfdDev, FdWalk& out,
            ScanStats& stats, pid_t tid = 0) {
  return fs::forEachEntryGreedy(fdDir, [&](std::string_view name, unsigned char) {
    ++stats.fdsStatted;
    struct stat st;
    // stat, not readlink: the magic link follows to the real inode, whatever
    // path the process's mount namespace gave it.
    if (::fstatat(fdDir, name.data(), &st, 0) != 0 || !S_ISCHR(st.st_mode)) return true;
    const auto maj = major(st.st_rdev), min = minor(st.st_rdev);
    if (maj == devices::kDrmMajor || maj == devices::kAccelMajor) {
      if (auto fd = text::parseU64(name)) out.drm.push_back({static_cast<int>(*fd), maj, min, tid});
    } else if (kfdDev && maj == kfdDev->major && min == kfdDev->minor) {
      out.holdsKfd = true;
    }
    return true;
  });
}

// Threads with a table of their own: /proc/<pid>/fd lists the thread-group
// leader's table only, so a DRM fd opened by a thread after
// unshare(CLONE_FILES) (or created by clone() without CLONE_FILES) was
// invisible to this meter. Each thread whose table is not the leader's is
// walked too; on procfs kcmp(KCMP_FILES) says which share it (one syscall
// a thread, no fd listing), and where it cannot say (no kcmp, no permission,
// a fixture tree) the thread's table is walked and its clients deduplicated
// by drm-client-id. Best effort past the leader's table: a thread that
// exits or cannot be read adds nothing, and the leader's walk stands.
void walkThreadTables(int taskDir, pid_t pid, bool procfs,
                      const std::optional<probes::DevNumber>& kfdDev, FdWalk& out,
                      ScanStats& stats) {
  std::vector<pid_t> tids;
  fs::forEachEntryGreedy(taskDir, [&](std::string_view name, unsigned char) {
    if (auto tid = text::parseU64(name);
        tid && *tid > 0 && *tid < (1u << 30) && static_cast<pid_t>(*tid) != pid)
      tids.push_back(static_cast<pid_t>(*tid));
    return true;
  });
  for (pid_t tid : tids) {
    if (procfs && ::syscall(SYS_kcmp, pid, tid, KCMP_FILES, 0, 0) == 0) continue;  // shared
    char name[32];
    std::snprintf(name, sizeof name, "%d/fd", tid);
    UniqueFd fdDir(::openat(taskDir, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fdDir.valid()) continue;
    ++stats.threadTables;
    walkFds(fdDir.get(), kfdDev, out, stats, tid);
  }
}

// comm, NSpid, uid, start time and (host scope) the cgroup of a GPU process.
// 0, or the errno of the read that failed (ENOENT/ESRCH: the process exited),
// or EINVAL with `why` when the kernel's text did not parse.
int readMetadata(ProcReader& reader, int pidDir, Process& p, bool readCgroupFile,
                 std::string& why) {
  auto read = [&](const char* file) {
    return pidDir >= 0 ? reader.readIn(pidDir, file) : reader.read(p.pid, file);
  };
  auto statText = read("stat");
  if (!statText) return statText.error().code;
  auto stat = probes::parseProcStat(*statText);
  if (!stat) {
    why = "cannot parse /proc/" + std::to_string(p.pid) + "/stat";
    return EINVAL;
  }
  p.startTimeTicks = stat->startTimeTicks;
  auto statusText = read("status");
  if (!statusText) return statusText.error().code;
  auto status = probes::parseProcStatus(*statusText);
  p.comm = std::move(status.name);
  p.nspid = std::move(status.nspid);
  p.uid = status.uidReal;
  if (!readCgroupFile) return 0;
  auto cgText = read("cgroup");
  if (!cgText) return cgText.error().code;
  if (auto cg = probes::parseProcCgroup(*cgText)) {
    p.cgroup = std::move(cg->path);
    p.cgroupDeleted = cg->deleted;
    p.cgroupOutsideNamespace = cg->outsideNamespace;
  } else {
    p.cgroupUnknownReason = "no cgroup v2 (0::) line in /proc/<pid>/cgroup";
  }
  return 0;
}

// Adds a fully read process and its clients, each client once (by key).
void commit(const fs::Root& sys, Scan& scan,
            std::unordered_map<std::string, std::size_t>& clientIndex, Pending&& p) {
  const pid_t pid = p.process.pid;
  for (std::size_t i = 0; i < p.fdinfos.size(); ++i) {
    auto& [fd, info] = p.fdinfos[i];
    const auto [major, minor] = p.nodes[i];
    auto [it, inserted] =
        clientIndex.try_emplace(clientKey(info, major, minor, pid, fd), scan.clients.size());
    if (inserted) {
      Client c;
      c.major = major;
      c.minor = minor;
      c.device = devices::resolveNode(sys, scan.devices, major, minor);
      c.undeduplicated = !info.clientId.has_value();
      c.info = std::move(info);
      scan.clients.push_back(std::move(c));
    }
    auto& holders = scan.clients[it->second].holders;
    const int fdNumber = fd;  // a structured binding is not captured (clang 14)
    if (std::find_if(holders.begin(), holders.end(), [&](const FdHolder& h) {
          return h.pid == pid && h.fd == fdNumber;
        }) == holders.end())
      holders.push_back({pid, fd});  // a thread's copy of the leader's fd is the same holder
    auto& mine = p.process.clients;
    if (std::find(mine.begin(), mine.end(), it->second) == mine.end()) mine.push_back(it->second);
  }
  scan.processes.push_back(std::move(p.process));
}

// Whether `fd` is a procfs directory: there a held /proc/<pid> fails every
// read once its process exited (the inode pins the process's struct pid, and
// a reused pid number has another), so its fd listing is the liveness check.
bool isProcfs(int fd) {
  struct statfs fs;
  return ::fstatfs(fd, &fs) == 0 && fs.f_type == PROC_SUPER_MAGIC;
}

bool ownPidNamespace(int procFd) {
  char self[32] = {};
  ssize_t n = ::readlinkat(procFd, "self", self, sizeof self - 1);
  return n > 0 && text::parseU64(std::string_view(self, static_cast<std::size_t>(n))) ==
                      static_cast<std::uint64_t>(::getpid());
}

// The held handles of `pid`: kept while they are still that process, opened
// afresh when the pid is new or names another process now. On procfs a held
// directory of an exited process fails its next listing (the caller drops
// it); elsewhere (fixture trees) the /proc/<pid> inode is compared. nullptr
// with `err` when the process cannot be opened.
ProcHandles::Held* hold(ProcHandles& handles, int procFd, bool procfs, pid_t pid, int& err) {
  char name[16];
  std::snprintf(name, sizeof name, "%d", pid);
  auto it = handles.held.find(pid);
  if (it != handles.held.end() && procfs) return &it->second;
  if (it != handles.held.end()) {
    struct stat now;
    if (::fstatat(procFd, name, &now, 0) != 0) {
      err = errno;
      handles.held.erase(it);
      return nullptr;
    }
    if (it->second.ino == now.st_ino) return &it->second;
    handles.held.erase(it);  // the pid was reused: nothing of the old process is kept
  }
  ProcHandles::Held h;
  h.pidDir = UniqueFd(::openat(procFd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  struct stat opened;
  if (!h.pidDir.valid() || ::fstat(h.pidDir.get(), &opened) != 0) {
    err = errno;
    return nullptr;
  }
  h.ino = opened.st_ino;  // the inode actually opened, not the one looked up before
  h.fdDir = UniqueFd(::openat(h.pidDir.get(), "fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!h.fdDir.valid()) {
    err = errno;
    return nullptr;
  }
  return &(handles.held[pid] = std::move(h));
}

// A process's fds listed through a fresh open of /proc/<pid>/fd (host scans).
int walkFreshImpl(ProcReader& reader, pid_t pid, const std::optional<probes::DevNumber>& kfdDev,
                  FdWalk& walk, ScanStats& stats, const char*& failed) {
  UniqueFd fdDir(reader.openFdDir(pid));
  if (!fdDir.valid()) {
    failed = "cannot open fd directory";
    return errno;
  }
  failed = "cannot list fds";
  return walkFds(fdDir.get(), kfdDev, walk, stats);
}

// A process's fds listed through its held fd directory (a meter's scans),
// rewound. When what was held exited, the pid may already name a new process
// of the lease: it is opened afresh and metered now, not a sample later.
int walkHeldImpl(ProcHandles& handles, ProcReader& reader, int procFd, bool procfs, pid_t pid,
                 const std::optional<probes::DevNumber>& kfdDev, FdWalk& walk, ScanStats& stats,
                 ProcHandles::Held*& held, const char*& failed) {
  const bool wasHeld = handles.held.count(pid) != 0;
  if (!wasHeld && handles.held.size() >= handles.maxHeld)
    return walkFreshImpl(reader, pid, kfdDev, walk, stats, failed);
  for (int attempt = 0; attempt < 2; ++attempt) {
    int err = 0;
    held = hold(handles, procFd, procfs, pid, err);
    if (!held && (err == EMFILE || err == ENFILE))
      return walkFreshImpl(reader, pid, kfdDev, walk, stats, failed);
    if (!held) {
      failed = "cannot open fd directory";
      return err;
    }
    failed = "cannot list fds";
    walk.drm.clear();
    walk.holdsKfd = false;
    int rc = ::lseek(held->fdDir.get(), 0, SEEK_SET) == 0
                 ? walkFds(held->fdDir.get(), kfdDev, walk, stats)
                 : errno;
    if (rc == 0) return 0;
    handles.held.erase(pid);  // never read through it again
    held = nullptr;
    if (!(wasHeld && attempt == 0 && vanished(rc))) return rc;
  }
  return ESRCH;
}

}  // namespace

Result<Scan> Scanner::run(const std::vector<Candidate>& candidates, bool readCgroupFile,
                          ProcHandles* handles) {
  stats_ = {};
  Scan scan;
  scan.observedAtNs = clock::realtimeNs();
  KfdIndex ownKfd;
  KfdIndex* kfdIndex = kfd_ ? kfd_ : &ownKfd;
  if (devices_) {
    scan.devices = *devices_;  // a copy: resolveNode may add a hot-plugged node
  } else {
    auto devices = devices::discoverDrmDevices(sys_);
    if (!devices) return devices.error();
    scan.devices = std::move(*devices);
  }
  if (!kfd_) ownKfd = readKfdIndex(sys_);
  KfdIndex& kfd = *kfdIndex;
  std::unordered_map<std::string, std::size_t> clientIndex;
  ProcReader reader(proc_.fd());
  FdWalk walk;
  if (handles) ++handles->generation;
  if (handles && handles->procfs < 0) handles->procfs = isProcfs(proc_.fd()) ? 1 : 0;
  const bool procfs = handles && handles->procfs == 1;
  // Whether kcmp can tell which threads share their leader's fd table: a
  // procfs of this pid namespace (its "self" is this process), so the pids
  // it lists are the pids kcmp compares.
  const bool kernelProc = (handles ? procfs : isProcfs(proc_.fd())) && ownPidNamespace(proc_.fd());
  if (hook_) hook_(ScanPoint::Listed, 0);

  for (const auto& candidate : candidates) {
    const pid_t pid = candidate.pid;
    ++stats_.pidsVisited;
    ProcHandles::Held* held = nullptr;
    walk.drm.clear();
    walk.holdsKfd = false;
    const char* failed = nullptr;  // which step, for an unreadable process's reason
    if (int rc = handles ? walkHeldImpl(*handles, reader, proc_.fd(), procfs, pid, kfd.dev, walk,
                                        stats_, held, failed)
                         : walkFreshImpl(reader, pid, kfd.dev, walk, stats_, failed);
        rc != 0) {
      if (vanished(rc))
        ++stats_.pidsVanished;
      else
        scan.unreadable.push_back({pid, permissionReason(rc, failed, pid)});
      continue;
    }
    if (held) held->generation = handles->generation;
    {
      UniqueFd taskDir(
          held ? ::openat(held->pidDir.get(), "task", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
               : reader.openTaskDir(pid));
      if (taskDir.valid()) walkThreadTables(taskDir.get(), pid, kernelProc, kfd.dev, walk, stats_);
    }
    if (hook_) hook_(ScanPoint::FdsWalked, pid);
    const bool kfdKnown = kfd.hasPid(pid);
    if (walk.drm.empty() && !walk.holdsKfd && !kfdKnown)
      continue;  // not a GPU process: no more reads
    stats_.drmFds += walk.drm.size();

    // Read everything first; a process that vanishes half-way is dropped whole.
    Pending p;
    p.process.pid = pid;
    p.process.holdsKfd = walk.holdsKfd;
    bool unreadable = false;
    for (const auto& d : walk.drm) {
      auto text = held ? reader.readFdinfoIn(held->pidDir.get(), d.fd, d.tid)
                       : reader.readFdinfo(pid, d.fd, d.tid);
      if (!text) {
        if (vanished(text.error().code)) continue;  // fd closed since the walk
        scan.unreadable.push_back(
            {pid, permissionReason(text.error().code, "cannot read fdinfo", pid)});
        unreadable = true;
        break;
      }
      p.fdinfos.emplace_back(d.fd, probes::parseDrmFdinfo(*text));
      p.nodes.emplace_back(d.major, d.minor);
    }
    if (unreadable) continue;
    // Every DRM fd closed since the walk, and no KFD: no longer a GPU process.
    if (p.fdinfos.empty() && !walk.holdsKfd && !kfdKnown) continue;
    // Metadata only for GPU processes (igt's lazy stat: most processes never get here).
    std::string why;
    if (held && held->metadataRead) {
      // Read when the process was first held; the held directory is still it.
      p.process.startTimeTicks = held->metadata.startTimeTicks;
      p.process.comm = held->metadata.comm;
      p.process.nspid = held->metadata.nspid;
      p.process.uid = held->metadata.uid;
    } else if (int rc = readMetadata(reader, held ? held->pidDir.get() : -1, p.process,
                                     readCgroupFile, why);
               rc != 0) {
      if (vanished(rc))
        ++stats_.pidsVanished;
      else
        scan.unreadable.push_back(
            {pid,
             !why.empty() ? why : permissionReason(rc, "cannot read stat, status or cgroup", pid)});
      continue;
    }
    if (held && !held->metadataRead) {
      held->metadata = p.process;
      held->metadataRead = true;
    }
    if (!readCgroupFile) p.process.cgroup = candidate.cgroup;
    if (kfdKnown) {
      for (auto& e : readKfdVram(sys_, kfd, pid))
        p.process.kfdVram.push_back({e.gpuId, e.context, std::move(e.pdev), e.bytes});
    }
    commit(sys_, scan, clientIndex, std::move(p));
  }

  if (handles) {
    // Processes gone from the scope since the last sample: let them go.
    std::erase_if(handles->held,
                  [&](const auto& e) { return e.second.generation != handles->generation; });
  }
  // Device indices may have shifted if resolveNode() inserted a device.
  for (auto& c : scan.clients) c.device = scan.devices.byNode(c.major, c.minor);
  canonicalise(scan);
  assignOwners(scan);
  return scan;
}

// getdents order is the filesystem's (hash order on ext4): sort everything so
// the same host state always gives the same document.
void canonicalise(Scan& scan) {
  for (auto& c : scan.clients)
    std::sort(c.holders.begin(), c.holders.end(), [](const FdHolder& a, const FdHolder& b) {
      return a.pid != b.pid ? a.pid < b.pid : a.fd < b.fd;
    });
  std::vector<std::size_t> order(scan.clients.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto rank = [&](std::size_t i) {
    const Client& c = scan.clients[i];
    return std::tuple(c.major, c.minor, c.info.clientId.value_or(UINT64_MAX), c.holders.front().pid,
                      c.holders.front().fd);
  };
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return rank(a) < rank(b); });
  std::vector<std::size_t> newIndex(order.size());
  std::vector<Client> sorted;
  sorted.reserve(order.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    newIndex[order[i]] = i;
    sorted.push_back(std::move(scan.clients[order[i]]));
  }
  scan.clients = std::move(sorted);
  for (auto& p : scan.processes) {
    for (auto& i : p.clients) i = newIndex[i];
    std::sort(p.clients.begin(), p.clients.end());
  }
  std::sort(scan.processes.begin(), scan.processes.end(),
            [](const Process& a, const Process& b) { return a.pid < b.pid; });
  std::sort(scan.unreadable.begin(), scan.unreadable.end(),
            [](const Unreadable& a, const Unreadable& b) { return a.pid < b.pid; });
}

void assignOwners(Scan& scan) {
  auto find = [&](pid_t pid) -> const Process* {
    auto it = std::lower_bound(scan.processes.begin(), scan.processes.end(), pid,
                               [](const Process& p, pid_t v) { return p.pid < v; });
    return it != scan.processes.end() && it->pid == pid ? &*it : nullptr;
  };
  for (auto& c : scan.clients) {
    const Process* owner = nullptr;
    const Process* first = nullptr;
    c.sharedAcrossProcesses = false;
    c.sharedAcrossCgroups = false;
    for (const auto& h : c.holders) {
      const Process* p = find(h.pid);
      if (p == nullptr) continue;
      if (first == nullptr) first = p;
      if (p->pid != first->pid) c.sharedAcrossProcesses = true;
      if (p->cgroup != first->cgroup) c.sharedAcrossCgroups = true;
      if (owner == nullptr || p->startTimeTicks < owner->startTimeTicks ||
          (p->startTimeTicks == owner->startTimeTicks && p->pid < owner->pid))
        owner = p;
    }
    c.owner = owner != nullptr ? owner->pid : 0;
  }
}

}  // namespace tally::scanner
