// One reader for the kernel's files. A Root is an open directory fd (the proc
// root, the sys root or the cgroup root); every read is relative to it with
// the *at() syscalls, so the same code runs on the live /proc, /sys and
// /sys/fs/cgroup and on fixture trees built in a temp dir. Holding the fd (as
// oomd's DirFd does) also pins the directory: a cgroup removed and re-created
// under the same name is not silently read through a stale handle.
#pragma once

#include <sys/stat.h>

#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"
#include "util/unique_fd.h"

namespace tally::fs {

// Default roots on a live system.
inline constexpr const char* kProcRoot = "/proc";
inline constexpr const char* kSysRoot = "/sys";
inline constexpr const char* kCgroupRoot = "/sys/fs/cgroup";

// Visit the entries of an open directory with getdents64 (no "." or "..").
// Returns 0 or an errno. `fn` returns false to stop early.
int forEachEntry(int dirFd,
                 const std::function<bool(std::string_view name, unsigned char type)>& fn);
// The same for a directory read from its start (a fresh or rewound fd) that a
// filesystem fills greedily, as procfs does: a getdents64 batch that leaves
// room for more entries was the whole listing, so the second call, which
// would return 0, is not made.
int forEachEntryGreedy(int dirFd,
                       const std::function<bool(std::string_view name, unsigned char type)>& fn);

// Read a file at dirFd/rel into `buf` with a single read() when it fits (the
// fdinfo and sysfs case); only a file that fills the buffer is read on into
// `spill`. Returns a view of the content, or an errno in Error.code.
Result<std::string_view> readAt(int dirFd, const char* rel, std::span<char> buf,
                                std::string& spill);

class Root {
 public:
  static Result<Root> open(const std::string& path);

  int fd() const { return fd_.get(); }
  const std::string& path() const { return path_; }  // for messages only
  std::string describe(std::string_view rel) const;  // "<path>/<rel>" for messages

  // Whole small file (sysfs attribute, cgroup file, /proc/<pid>/status ...).
  Result<std::string> read(std::string_view rel, std::size_t limit = std::size_t{1} << 20) const;
  Result<std::string> readLink(std::string_view rel) const;
  Result<struct stat> stat(std::string_view rel) const;  // follows symlinks
  bool exists(std::string_view rel) const;
  Result<std::vector<std::string>> list(std::string_view rel) const;
  // The directory at `rel`, opened without following any symlink on the way
  // and without leaving this root (openat2 RESOLVE_BENEATH |
  // RESOLVE_NO_SYMLINKS): what a client names is what is opened, never an
  // alias. ELOOP/EXDEV name the refusal.
  Result<Root> openDirBeneath(std::string_view rel) const;
  // fstat of this root's own directory (owner, inode of what is held open).
  Result<struct stat> statSelf() const;
  // fstatat without following a final symlink.
  Result<struct stat> lstat(std::string_view rel) const;
  // One write() of `value` to an existing file (a cgroup knob: memory.max,
  // cgroup.procs, cgroup.kill), never through a symlink (O_NOFOLLOW: no
  // kernel knob is one). The error names the file and the value.
  Status write(std::string_view rel, std::string_view value) const;

 private:
  Root(UniqueFd fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)) {}
  UniqueFd fd_;
  std::string path_;
};

// "<dir>/<name>" for a path relative to a Root; a dir of "/" or "" gives
// "<name>". (Root strips leading slashes, so cgroup paths as the kernel prints
// them, "/tally.slice/...", can be joined directly.)
std::string joinPath(std::string_view dir, std::string_view name);

// The last component of a path ("../../devices/pci0000:00/0000:c6:00.0" ->
// "0000:c6:00.0"; trailing slashes ignored), and its parent ("/a/b" -> "/a",
// "/a" -> "/"; a path without a slash has parent "").
std::string_view baseName(std::string_view path);
std::string_view parentPath(std::string_view path);

// Roots a command reads from; every command takes --proc-root, --sys-root and
// --cgroup-root (diagnostic/testing options) to point them at a fixture tree.
struct RootPaths {
  std::string proc = kProcRoot;
  std::string sys = kSysRoot;
  std::string cgroup = kCgroupRoot;
};

}  // namespace tally::fs
