#include "floor.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

namespace tally::bench {
namespace {

// Raw getdents64 loop; calls fn(name) for every entry but "." and "..".
template <typename Fn>
void entries(int dirFd, Fn&& fn) {
  alignas(8) char buf[32768];
  for (;;) {
    long n = ::syscall(SYS_getdents64, dirFd, buf, sizeof buf);
    if (n <= 0) return;
    for (long off = 0; off < n;) {
      const char* e = buf + off;
      unsigned short reclen;
      std::memcpy(&reclen, e + 16, sizeof reclen);
      const char* name = e + 19;
      off += reclen;
      if (name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0))) continue;
      fn(name);
    }
  }
}

bool numeric(const char* s) {
  if (*s == 0) return false;
  for (; *s; ++s)
    if (*s < '0' || *s > '9') return false;
  return true;
}

// One process: its fd listing, one fstatat per fd, each DRM fd's fdinfo read.
void floorProcess(int procFd, const char* pid, FloorResult& r) {
  char path[64];
  char buf[8192];
  ++r.pids;
  std::snprintf(path, sizeof path, "%s/fd", pid);
  int fdDir = ::openat(procFd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fdDir < 0) return;
  entries(fdDir, [&](const char* fd) {
    ++r.fds;
    struct stat st;
    if (::fstatat(fdDir, fd, &st, 0) != 0 || !S_ISCHR(st.st_mode) || major(st.st_rdev) != 226)
      return;
    ++r.drmFds;
    std::snprintf(path, sizeof path, "%s/fdinfo/%s", pid, fd);
    int f = ::openat(procFd, path, O_RDONLY | O_CLOEXEC);
    if (f < 0) return;
    ssize_t n = ::read(f, buf, sizeof buf);
    if (n > 0) r.bytes += static_cast<std::uint64_t>(n);
    ::close(f);
  });
  ::close(fdDir);
}

}  // namespace

FloorResult floorScan(int procFd) {
  FloorResult r;
  int dir = ::openat(procFd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  entries(dir, [&](const char* pid) {
    if (numeric(pid)) floorProcess(procFd, pid, r);
  });
  ::close(dir);
  return r;
}

FloorResult cgroupFloorScan(int procFd, int cgroupDirFd) {
  FloorResult r;
  int procs = ::openat(cgroupDirFd, "cgroup.procs", O_RDONLY | O_CLOEXEC);
  if (procs < 0) return r;
  std::string text;
  char chunk[65536];
  for (ssize_t n; (n = ::read(procs, chunk, sizeof chunk)) > 0;)
    text.append(chunk, static_cast<std::size_t>(n));
  ::close(procs);
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string pid = text.substr(at, end - at);
    at = end + 1;
    if (!pid.empty()) floorProcess(procFd, pid.c_str(), r);
  }
  return r;
}

FloorResult naiveScan(const std::string& procRoot) {
  namespace stdfs = std::filesystem;
  FloorResult r;
  std::error_code ec;
  for (const auto& pidEntry : stdfs::directory_iterator(procRoot, ec)) {
    const std::string pid = pidEntry.path().filename().string();
    if (!numeric(pid.c_str())) continue;
    ++r.pids;
    std::error_code ec2;
    for (const auto& fdEntry : stdfs::directory_iterator(pidEntry.path() / "fdinfo", ec2)) {
      ++r.fds;
      std::ifstream in(fdEntry.path());
      std::string line;
      bool drm = false;
      while (std::getline(in, line)) {
        if (line.rfind("drm-", 0) == 0) {
          drm = true;
          r.bytes += line.size();
        }
      }
      r.drmFds += drm;
    }
  }
  return r;
}

}  // namespace tally::bench
