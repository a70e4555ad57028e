// Synthetic /proc and /sys trees in a temp dir, shaped like the kernel's (the
// oomd fixture idea, extended to procfs and sysfs). Root can mknod real char
// device nodes, so /proc/<pid>/fd/<n> symlinks point at genuine 226:<minor>
// inodes and the scanner's fstatat path is exercised exactly as on a host.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tally::testing {

class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A full disk, for this process, while it lives: every write past `bytes`
// of a regular file fails with EFBIG (RLIMIT_FSIZE; SIGXFSZ ignored), as a
// write to a full filesystem fails with ENOSPC. No mount is touched.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(std::uint64_t bytes);
  ~FileSizeLimit();
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  std::uint64_t savedCur_ = 0, savedMax_ = 0;
  void (*savedHandler_)(int) = nullptr;
};

// Filesystem helpers; each creates missing parent directories and aborts the
// test (ADD_FAILURE + throw) when the filesystem refuses.
void writeFile(const std::string& path, const std::string& content);
void makeDirs(const std::string& path);
void makeSymlink(const std::string& target, const std::string& link);
void makeCharDevice(const std::string& path, unsigned major, unsigned minor);
std::string readFile(const std::string& path);

struct FakeFd {
  int fd = 3;
  // Either a DRM minor (the fd points at a 226:<minor> node) or another
  // device/file path ("null" = a 1:3 char node, anything else = regular file).
  std::optional<unsigned> drmMinor;
  std::string other = "file";
  std::string fdinfo;  // content of fdinfo/<fd>; empty = the generic 4 lines
  bool fdinfoMissing = false;
};

struct FakeProcess {
  pid_t pid = 0;
  std::string comm = "proc";
  std::string cgroup = "/";  // written as "0::<cgroup>"
  std::string cgroupFile;    // overrides the whole /proc/<pid>/cgroup content when set
  std::uint64_t startTime = 100;
  std::vector<std::uint64_t> nspid;  // defaults to {pid}
  std::uint32_t uid = 0;
  std::vector<FakeFd> fds;
  bool noFdDir = false;  // the process vanished between listing and reading
  // Threads with an fd table of their own (unshare(CLONE_FILES)): task/<tid>/fd.
  std::map<pid_t, std::vector<FakeFd>> threadFds{};
};

struct FakeDevice {
  std::string bdf = "0000:c6:00.0";
  std::string driver = "amdgpu";
  std::vector<unsigned> minors = {1, 128};
  std::map<std::string, std::uint64_t> memInfo;  // "gtt_total" -> bytes (mem_info_<key>)
  bool pci = true;
  std::vector<unsigned> accelMinors = {};  // accel<N> nodes (major 261): an NPU
};

class FakeHost {
 public:
  FakeHost();
  std::string procRoot() const { return dir_.path() + "/proc"; }
  std::string sysRoot() const { return dir_.path() + "/sys"; }
  std::string cgroupRoot() const { return dir_.path() + "/cgroup"; }
  std::string root() const { return dir_.path(); }

  void addDevice(const FakeDevice& d);
  void addProcess(const FakeProcess& p);
  void setMemAvailable(std::uint64_t bytes);
  void setModuleParam(const std::string& module, const std::string& param,
                      const std::string& value);
  // /sys/module/<module>/holders/<holder>, as the kernel links it (to the
  // holder's own /sys/module directory).
  void addModuleHolder(const std::string& module, const std::string& holder);
  // cgroup v2 tree: <cgroup>/<path>/cgroup.procs
  void addCgroup(const std::string& path, const std::vector<pid_t>& pids);
  // KFD as amdkfd shows it: /dev/kfd (240:0), the topology node mapping
  // `gpuId` to the PCI device `bdf`, and the process's
  // /sys/class/kfd/kfd/proc/<pid>/vram_<gpuid> (VRAM-flagged bytes). The
  // process itself holds /dev/kfd when it is given an fd on "char:240:0".
  void addKfd(pid_t pid, std::uint64_t gpuId, const std::string& bdf, std::uint64_t vramBytes);

 private:
  std::string devNode(unsigned major, unsigned minor);
  TempDir dir_;
};

// A modern amdgpu fdinfo (drm_print_memory_stats + legacy keys) for tests.
std::string amdgpuFdinfo(std::uint64_t clientId, const std::string& pdev, std::uint64_t gttKiB,
                         std::uint64_t vramKiB);

}  // namespace tally::testing
