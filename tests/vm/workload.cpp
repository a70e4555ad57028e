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
//   hide TRICK MIB N READY RELEASE
//                                N GTT buffers of MIB each, made where a procfs meter does not
//                                look: TRICK "own-fd-table" (a thread that unshared its fd
//                                table), "exited-leader" (a thread; the leader exits),
//                                "parked-fd" (the fd sent into a socket nobody reads, its own
//                                closed). READY gets "created=K refused=R" (refused: ENOMEM);
//                                held until RELEASE exists (60 s at most)
//   give SOCKET MIB N             N GTT buffers of MIB each, their DRM fd sent to the process
//                                listening on the Unix socket SOCKET (take), then exit 0
//   take SOCKET READY RELEASE    listen on SOCKET, receive one fd, create READY, hold the fd
//                                until RELEASE exists (120 s at most)
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "../../vm/testdrm/tally_testdrm_uapi.h"
#include "../support/scm_rights.h"

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
    // Its device (the module's platform device, .../platform/tally_testdrm)
    // or its driver names it: found without allocating, which a lease bounded
    // at no GPU memory (Slurm's no_gres=refuse) would refuse and count.
    for (const char* link : {"/device", "/device/driver"}) {
      char name[256] = {};
      std::string path = "/sys/class/drm/renderD" + std::to_string(minor) + link;
      ssize_t n = ::readlink(path.c_str(), name, sizeof name - 1);
      if (n > 0 && std::strstr(name, "tally_testdrm")) return fd;
    }
    // Else accept the first node whose create ioctl works.
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

struct Hidden {
  std::string trick, readyPath, releasePath;
  unsigned long mib = 0;
  int count = 0;
};

// Makes the buffers, says how many the kernel let it make, holds them.
void* hideBuffers(void* arg) {
  auto* h = static_cast<Hidden*>(arg);
  if (h->trick == "own-fd-table" && ::unshare(CLONE_FILES) != 0) std::perror("unshare");
  int fd = openTestDrm();
  int created = 0, refused = 0;
  for (int i = 0; fd >= 0 && i < h->count; ++i) {
    tally_testdrm_create c{static_cast<__u64>(h->mib) << 20, TALLY_TESTDRM_REGION_GTT, 0};
    if (::ioctl(fd, DRM_IOCTL_TALLY_TESTDRM_CREATE, &c) == 0)
      ++created;
    else if (errno == ENOMEM)
      ++refused;
  }
  int sv[2] = {-1, -1};
  if (h->trick == "parked-fd" && fd >= 0 && ::socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) == 0 &&
      tally::testing::sendFd(sv[0], fd) == 0) {
    ::close(fd);  // only the message in flight holds it now
    ::close(sv[0]);
  }
  std::string said = "created=" + std::to_string(created) + " refused=" + std::to_string(refused);
  int out = ::open((h->readyPath + ".tmp").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (out >= 0) {
    if (::write(out, said.data(), said.size()) < 0) std::perror("write");
    ::close(out);
    ::rename((h->readyPath + ".tmp").c_str(), h->readyPath.c_str());
  }
  waitForFile(h->releasePath.c_str(), 60000);
  return nullptr;
}

int hide(Hidden h) {
  pthread_t t;
  auto* held = new Hidden(std::move(h));  // outlives the leader when it exits first
  if (pthread_create(&t, nullptr, hideBuffers, held) != 0) return 1;
  // The leader leaves its thread running: /proc/<pid>/fd of a dead leader is empty.
  if (held->trick == "exited-leader") pthread_exit(nullptr);
  pthread_join(t, nullptr);
  return 0;
}

// Buffers made here, held by another process: they outlive this one.
int give(const char* socketPath, unsigned long mib, int count) {
  int fd = openTestDrm();
  if (fd < 0) return std::fprintf(stderr, "no tally_testdrm render node (insmod the driver)\n"), 1;
  for (int i = 0; i < count; ++i) {
    tally_testdrm_create c{static_cast<__u64>(mib) << 20, TALLY_TESTDRM_REGION_GTT, 0};
    if (::ioctl(fd, DRM_IOCTL_TALLY_TESTDRM_CREATE, &c) != 0) return std::perror("create"), 1;
  }
  int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::snprintf(a.sun_path, sizeof a.sun_path, "%s", socketPath);
  if (s < 0 || ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
    return std::perror("connect"), 1;
  if (tally::testing::sendFd(s, fd) != 0) return std::perror("sendmsg"), 1;
  char ack = 0;
  if (::read(s, &ack, 1) != 1) return std::fprintf(stderr, "no ack\n"), 1;  // it holds the fd now
  return 0;
}

int take(const char* socketPath, const char* readyPath, const char* releasePath) {
  int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::snprintf(a.sun_path, sizeof a.sun_path, "%s", socketPath);
  ::unlink(socketPath);
  if (s < 0 || ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(s, 1) != 0)
    return std::perror("listen"), 1;
  ready((std::string(readyPath) + ".listening").c_str());
  int c = ::accept4(s, nullptr, nullptr, SOCK_CLOEXEC);
  if (c < 0) return std::perror("accept"), 1;
  int fd = tally::testing::recvFd(c);
  if (fd < 0) return std::fprintf(stderr, "recvmsg: %s\n", std::strerror(-fd)), 1;
  if (::write(c, "k", 1) != 1) return std::perror("ack"), 1;
  ready(readyPath);
  waitForFile(releasePath, 120'000);
  ::close(fd);
  return 0;
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
  if (cmd == "give" && argc == 5)
    return give(argv[2], std::strtoul(argv[3], nullptr, 10), std::atoi(argv[4]));
  if (cmd == "take" && argc == 5) return take(argv[2], argv[3], argv[4]);
  if (cmd == "hide" && argc == 7)
    return hide(
        {argv[2], argv[5], argv[6], std::strtoul(argv[3], nullptr, 10), std::atoi(argv[4])});
  std::fprintf(stderr,
               "usage: tally_vm_workload hog MIB [HOLD_MS [READY]] | gpu REGION MIB N HOLD_MS "
               "[READY [RELEASE]] | step REGION MIB1 MIB2 READY GO CROSSED HOLD_MS | tree PIDFILE "
               "| marker PATH | hide TRICK MIB N READY RELEASE | give SOCKET MIB N | take SOCKET "
               "READY RELEASE\n");
  return 2;
}
