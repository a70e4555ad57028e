// The workloads the VM system tests run under `tally run`:
//   hog MIB [HOLD_MS [READY]]    allocate and touch MIB of anonymous memory, then hold it
//   gpu REGION MIB N HOLD_MS [READY [RELEASE]]
//                                N buffers of MIB each in "gtt" or "vram" through the test
//                                DRM driver (vm/testdrm), held for HOLD_MS, or until
//                                RELEASE exists when given (HOLD_MS at most)
// READY, when given, is created once the memory is allocated: the test's
// barrier ("the workload holds its memory now"), never a sleep.
//   step REGION MIB1 MIB2 READY GO CROSSED HOLD_MS
//                                near a bound, then over it (the reaction benchmark)
//   tree PIDFILE                 fork a grandchild; write "<child> <grandchild>" to PIDFILE; sleep
//   marker PATH                  create PATH and exit 0 (proves the workload ran)
#include <fcntl.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "../../vm/testdrm/tally_testdrm_uapi.h"

namespace {

void ready(const char* path) {
  if (!path) return;
  std::string tmp = std::string(path) + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) ::close(fd);
  ::rename(tmp.c_str(), path);
}

// Blocks until PATH exists (the test's barrier, by inotify on its directory,
// no polling) or timeoutMs passes; true when it exists.
bool waitForFile(const char* path, long timeoutMs) {
  std::string p(path);
  auto slash = p.rfind('/');
  std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : p.substr(0, slash));
  int in = ::inotify_init1(IN_CLOEXEC);
  if (in < 0) return false;
  ::inotify_add_watch(in, dir.c_str(), IN_CREATE | IN_MOVED_TO);
  bool found = false;
  timespec start{};
  ::clock_gettime(CLOCK_MONOTONIC, &start);
  // Checked after the watch exists: a file created before is seen here, one
  // created after wakes the poll.
  while (!(found = ::access(path, F_OK) == 0)) {
    timespec now{};
    ::clock_gettime(CLOCK_MONOTONIC, &now);
    long left =
        timeoutMs - ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000);
    if (left <= 0) break;
    pollfd pfd{in, POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(left)) > 0) {
      char buf[4096];
      [[maybe_unused]] auto n = ::read(in, buf, sizeof buf);
    }
  }
  ::close(in);
  return found;
}

int hog(unsigned long mib, long holdMs, const char* readyPath) {
  std::size_t bytes = mib << 20;
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return std::perror("mmap"), 1;
  std::memset(p, 0x5a, bytes);
  ready(readyPath);
  if (holdMs > 0) ::usleep(static_cast<useconds_t>(holdMs * 1000));
  return 0;
}

int openTestDrm() {
  for (int minor = 128; minor < 192; ++minor) {
    std::string node = "/dev/dri/renderD" + std::to_string(minor);
    int fd = ::open(node.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) continue;
    char name[64] = {};
    std::string drv = "/sys/class/drm/renderD" + std::to_string(minor) + "/device/driver";
    ssize_t n = ::readlink(drv.c_str(), name, sizeof name - 1);
    if (n > 0 && std::strstr(name, "tally_testdrm")) return fd;
    // A platform device's driver link may be absent: accept the first node
    // whose create ioctl works.
    tally_testdrm_create probe{4096, TALLY_TESTDRM_REGION_GTT, 0};
    if (::ioctl(fd, DRM_IOCTL_TALLY_TESTDRM_CREATE, &probe) == 0) {
      ::close(fd);
      return ::open(node.c_str(), O_RDWR | O_CLOEXEC);
    }
    ::close(fd);
  }
  return -1;
}

int gpu(const char* region, unsigned long mib, int count, long holdMs, const char* readyPath,
        const char* releasePath) {
  int fd = openTestDrm();
  if (fd < 0) return std::fprintf(stderr, "no tally_testdrm render node (insmod the driver)\n"), 1;
  unsigned r =
      std::strcmp(region, "vram") == 0 ? TALLY_TESTDRM_REGION_VRAM : TALLY_TESTDRM_REGION_GTT;
  for (int i = 0; i < count; ++i) {
    tally_testdrm_create c{static_cast<__u64>(mib) << 20, r, 0};
    if (::ioctl(fd, DRM_IOCTL_TALLY_TESTDRM_CREATE, &c) != 0) return std::perror("create"), 1;
  }
  ready(readyPath);
  if (releasePath) {
    // Held until the test says so (or HOLD_MS at most): the test's barrier, not a guess.
    waitForFile(releasePath, holdMs);
    return 0;
  }
  ::usleep(static_cast<useconds_t>(holdMs * 1000));
  return 0;
}

// Near a bound, then over it: MIB1 allocated, READY created; once GO exists,
// MIB2 more; CROSSED gets the CLOCK_REALTIME ns at which the second buffer
// existed (the moment the lease crossed), then held for HOLD_MS.
int step(const char* region, unsigned long mib1, unsigned long mib2, const char* readyPath,
         const char* goPath, const char* crossedPath, long holdMs) {
  int fd = openTestDrm();
  if (fd < 0) return std::fprintf(stderr, "no tally_testdrm render node (insmod the driver)\n"), 1;
  unsigned r =
      std::strcmp(region, "vram") == 0 ? TALLY_TESTDRM_REGION_VRAM : TALLY_TESTDRM_REGION_GTT;
  tally_testdrm_create first{static_cast<__u64>(mib1) << 20, r, 0};
  if (::ioctl(fd, DRM_IOCTL_TALLY_TESTDRM_CREATE, &first) != 0) return std::perror("create"), 1;
  ready(readyPath);
  if (!waitForFile(goPath, 600'000)) return std::fprintf(stderr, "no %s\n", goPath), 1;
  tally_testdrm_create second{static_cast<__u64>(mib2) << 20, r, 0};
  if (::ioctl(fd, DRM_IOCTL_TALLY_TESTDRM_CREATE, &second) != 0) return std::perror("create"), 1;
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  std::string tmp = std::string(crossedPath) + ".tmp";
  if (FILE* f = std::fopen(tmp.c_str(), "w")) {
    std::fprintf(f, "%lld\n", static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec);
    std::fclose(f);
    ::rename(tmp.c_str(), crossedPath);
  }
  ::usleep(static_cast<useconds_t>(holdMs * 1000));
  return 0;
}

int tree(const char* pidfile) {
  pid_t child = ::fork();
  if (child == 0) {
    for (;;) ::pause();
  }
  std::string tmp = std::string(pidfile) + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (!f) return 1;
  std::fprintf(f, "%d %d\n", ::getpid(), child);
  std::fclose(f);
  ::rename(tmp.c_str(), pidfile);
  for (;;) ::pause();
}

int marker(const char* path) {
  int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  return fd < 0 ? 1 : (::close(fd), 0);
}

}  // namespace

int main(int argc, char** argv) {
  std::string cmd = argc > 1 ? argv[1] : "";
  if (cmd == "hog" && argc >= 3 && argc <= 5) {
    return hog(std::strtoul(argv[2], nullptr, 10), argc > 3 ? std::atol(argv[3]) : 0,
               argc > 4 ? argv[4] : nullptr);
  }
  if (cmd == "gpu" && argc >= 6 && argc <= 8) {
    return gpu(argv[2], std::strtoul(argv[3], nullptr, 10), std::atoi(argv[4]), std::atol(argv[5]),
               argc >= 7 ? argv[6] : nullptr, argc == 8 ? argv[7] : nullptr);
  }
  if (cmd == "step" && argc == 9) {
    return step(argv[2], std::strtoul(argv[3], nullptr, 10), std::strtoul(argv[4], nullptr, 10),
                argv[5], argv[6], argv[7], std::atol(argv[8]));
  }
  if (cmd == "tree" && argc == 3) return tree(argv[2]);
  if (cmd == "marker" && argc == 3) return marker(argv[2]);
  std::fprintf(stderr,
               "usage: tally_vm_workload hog MIB [HOLD_MS [READY]] | gpu REGION MIB N HOLD_MS "
               "[READY [RELEASE]] | step REGION MIB1 MIB2 READY GO CROSSED HOLD_MS | tree PIDFILE "
               "| marker PATH\n");
  return 2;
}
