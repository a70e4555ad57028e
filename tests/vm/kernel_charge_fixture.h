// The kernel charge's VM fixture: the BPF programs loaded by tally's own
// loader, leases armed by cgroup id, and allocators (children that do one
// step per command, so every assertion follows the step it checks: pipes are
// the barriers) making buffers through the test DRM driver's real allocation
// ioctls (its own CREATE, amdgpu's GEM_CREATE, KFD's ALLOC_MEMORY_OF_GPU).
// Shared by kernel_charge_test.cpp and kernel_charge_redteam_test.cpp. VM
// harness only.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bpf/gpu_charge_abi.h"
#include "bpf/kernel_charge_bpf.h"
#include "support/fake_host.h"
#include "support/scm_rights.h"
#include "tally_testdrm_uapi.h"

namespace tally::vmcharge {

using namespace tally::testing;

constexpr std::uint64_t kMiB = 1u << 20;

inline std::string testDrmKo() {
  const char* ko = std::getenv("TALLY_TESTDRM_KO");
  return ko ? ko : "";
}

// Loads the test driver with `params` (reloading it when it is loaded).
inline void loadDriver(const std::string& params) {
  ASSERT_FALSE(testDrmKo().empty());
  if (::access("/sys/module/tally_testdrm", F_OK) == 0) {
    ASSERT_EQ(std::system("rmmod tally_testdrm"), 0) << "a process still holds the test driver";
  }
  ASSERT_EQ(std::system(("modprobe drm && insmod " + testDrmKo() + " " + params).c_str()), 0);
}

inline void removePins() { ASSERT_EQ(std::system("rm -rf /sys/fs/bpf/tally-test"), 0); }

inline std::uint64_t cgroupId(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return 0;
  return st.st_ino;
}

inline std::string makeCgroup(const std::string& name) {
  std::string dir = "/sys/fs/cgroup/" + name;
  ::rmdir(dir.c_str());
  EXPECT_EQ(::mkdir(dir.c_str(), 0755), 0) << dir;
  return dir;
}

// struct drm_mode_create_dumb and DRM_IOCTL_MODE_CREATE_DUMB (drm_mode.h,
// drm.h), spelled out as the test driver's uapi header spells its own.
struct drm_mode_create_dumb_args {
  std::uint32_t height, width, bpp, flags, handle, pitch;
  std::uint64_t size;
};
inline constexpr unsigned long kCreateDumb = _IOWR('d', 0xb2, drm_mode_create_dumb_args);

// A child that does one thing per command and answers with its result (0,
// a handle, or -errno): the test's barrier for every step.
class Allocator {
 public:
  enum Op : char {
    Open = 'o',
    OpenKfd = 'k',
    Loop = 'l',
    Create = 'c',
    Amdgpu = 'a',
    Kfd = 'K',
    // The same allocations in other encodings: a struct cut short to its
    // size field (the driver zero-fills the rest), another type byte ('e'
    // for DRM's 'd', which drm_ioctl refuses; 'L' for KFD's 'K', which
    // kfd_ioctl takes).
    CreateSizeOnly = 'h',
    CreateOtherType = 't',
    KfdOtherType = 'T',
    Dumb = 'D',  // a dumb buffer of `bytes` (1024 pixels of 32 bits a row) on the card node
    // `region` carries the flags or domains as the caller means them:
    KfdFlags = 'F',       // ALLOC_MEMORY_OF_GPU of `bytes` with these KFD flags
    AmdgpuDomains = 'G',  // GEM_CREATE of `bytes` with these amdgpu domains
    ColdCreate = 'C',     // CREATE whose argument sits in a page not yet mapped
    Race = 'R',           // wait for the go pipe, then CREATE `bytes` `region` times: how many made
    Self = 'p',           // its pid (to move it between cgroups)
    KfdMapOn = 'M',       // a GTT buffer of `bytes`, mapped on `region` GPUs: MAP's result
    DumbNarrow = 'N',     // a dumb buffer 1 pixel of 8 bits wide, `bytes` rows tall
    Close = 'x',
    SendFd = 's',
    RecvFd = 'r',
    Quit = 'q'
  };
  // `sock`: one end of a socketpair for passing fds between two allocators.
  // `go`: the read end of a pipe every racing allocator waits on (Race).
  explicit Allocator(const std::string& cgroup, int sock = -1, int go = -1) {
    int toChild[2], toParent[2];
    EXPECT_EQ(::pipe(toChild), 0);
    EXPECT_EQ(::pipe(toParent), 0);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(toChild[1]);
      ::close(toParent[0]);
      serve(toChild[0], toParent[1], sock, go);
      ::_exit(0);
    }
    ::close(toChild[0]);
    ::close(toParent[1]);
    cmd_ = toChild[1];
    reply_ = toParent[0];
    writeFile(cgroup + "/cgroup.procs", std::to_string(pid_) + "\n");
  }
  ~Allocator() {
    (void)call(Quit);
    ::close(cmd_);
    ::close(reply_);
    ::waitpid(pid_, nullptr, 0);
  }
  pid_t pid() const { return pid_; }
  // A command sent now, its answer read later (racing allocators start together).
  bool send(Op op, std::uint64_t bytes = 0, std::uint32_t region = 0) {
    Cmd c{op, region, bytes};
    return ::write(cmd_, &c, sizeof c) == sizeof c;
  }
  std::int64_t answer() {
    std::int64_t r = -EPIPE;
    if (::read(reply_, &r, sizeof r) != sizeof r) return -EPIPE;
    return r;
  }
  std::int64_t call(Op op, std::uint64_t bytes = 0, std::uint32_t region = 0) {
    Cmd c{op, region, bytes};
    if (::write(cmd_, &c, sizeof c) != sizeof c) return -EPIPE;
    std::int64_t r = -EPIPE;
    if (::read(reply_, &r, sizeof r) != sizeof r) return -EPIPE;
    return r;
  }

 private:
  struct Cmd {
    char op;
    std::uint32_t region;
    std::uint64_t bytes;
  };

  static std::int64_t result(int rc) { return rc == 0 ? 0 : -errno; }

  static void serve(int in, int out, int sock, int go) {
    int drm = -1, kfd = -1, card = -1;
    Cmd c{};
    while (::read(in, &c, sizeof c) == sizeof c) {
      std::int64_t r = 0;
      switch (c.op) {
        case Open:
          drm = ::open("/dev/dri/renderD128", O_RDWR | O_CLOEXEC);
          r = drm < 0 ? -errno : 0;
          break;
        case OpenKfd:
          kfd = ::open("/dev/kfd", O_RDWR | O_CLOEXEC);
          r = kfd < 0 ? -errno : 0;
          break;
        case Create: {
          tally_testdrm_create a{c.bytes, c.region, 0};
          r = result(::ioctl(drm, DRM_IOCTL_TALLY_TESTDRM_CREATE, &a));
          break;
        }
        case Dumb: {
          if (card < 0) card = ::open("/dev/dri/card0", O_RDWR | O_CLOEXEC);
          drm_mode_create_dumb_args a{};
          a.width = 1024;
          a.bpp = 32;
          a.height = static_cast<std::uint32_t>(c.bytes / 4096);
          r = card < 0 ? -errno : result(::ioctl(card, kCreateDumb, &a));
          break;
        }
        case DumbNarrow: {
          if (card < 0) card = ::open("/dev/dri/card0", O_RDWR | O_CLOEXEC);
          drm_mode_create_dumb_args a{};
          a.width = 1;
          a.bpp = 8;
          a.height = static_cast<std::uint32_t>(c.bytes);
          r = card < 0 ? -errno : result(::ioctl(card, kCreateDumb, &a));
          break;
        }
        case CreateOtherType: {
          tally_testdrm_create a{c.bytes, c.region, 0};
          r = result(::ioctl(drm, _IOWR('e', 0x42, tally_testdrm_create), &a));
          break;
        }
        case CreateSizeOnly: {  // region and handle left to the driver's zeros: GTT
          std::uint64_t size = c.bytes;
          r = result(::ioctl(drm, _IOWR('d', 0x42, std::uint64_t), &size));
          break;
        }
        case KfdOtherType: {
          tally_testkfd_alloc_memory_of_gpu a{};
          a.size = c.bytes;
          a.flags = TALLY_TESTKFD_ALLOC_GTT;
          r = result(::ioctl(kfd, _IOWR('L', 0x16, tally_testkfd_alloc_memory_of_gpu), &a));
          break;
        }
        case Amdgpu: {
          tally_testdrm_amdgpu_gem_create a{};
          a.in.bo_size = c.bytes;
          a.in.domains = c.region == TALLY_TESTDRM_REGION_VRAM ? TALLY_TESTDRM_AMDGPU_DOMAIN_VRAM
                                                               : TALLY_TESTDRM_AMDGPU_DOMAIN_GTT;
          r = result(::ioctl(drm, DRM_IOCTL_TALLY_TESTDRM_AMDGPU_GEM_CREATE, &a));
          break;
        }
        case Kfd: {
          tally_testkfd_alloc_memory_of_gpu a{};
          a.size = c.bytes;
          a.flags = TALLY_TESTKFD_ALLOC_GTT;
          r = result(::ioctl(kfd, AMDKFD_IOC_TALLY_ALLOC_MEMORY_OF_GPU, &a));
          break;
        }
        case KfdFlags: {
          tally_testkfd_alloc_memory_of_gpu a{};
          a.size = c.bytes;
          a.flags = c.region;
          a.va_addr = 1ull << 40;
          if (c.region & TALLY_TESTKFD_ALLOC_USERPTR) {  // the user range it pins
            void* p = ::mmap(nullptr, c.bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                             -1, 0);
            a.mmap_offset = p == MAP_FAILED ? 0 : reinterpret_cast<std::uintptr_t>(p);
          }
          r = result(::ioctl(kfd, AMDKFD_IOC_TALLY_ALLOC_MEMORY_OF_GPU, &a));
          break;
        }
        case AmdgpuDomains: {
          tally_testdrm_amdgpu_gem_create a{};
          a.in.bo_size = c.bytes;
          a.in.domains = c.region;
          r = result(::ioctl(drm, DRM_IOCTL_TALLY_TESTDRM_AMDGPU_GEM_CREATE, &a));
          break;
        }
        case ColdCreate: {
          // Written with write(2) into a memfd and mapped fresh: the page is
          // in the page cache but not in this process's page table, so a
          // read that cannot fault fails where the driver's copy succeeds.
          tally_testdrm_create a{c.bytes, c.region, 0};
          int mfd = static_cast<int>(::syscall(SYS_memfd_create, "tally-cold", 0));
          if (mfd < 0 || ::write(mfd, &a, sizeof a) != static_cast<ssize_t>(sizeof a)) {
            r = -EIO;
            break;
          }
          void* p = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
          ::close(mfd);
          if (p == MAP_FAILED) {
            r = -EIO;
            break;
          }
          r = result(::ioctl(drm, DRM_IOCTL_TALLY_TESTDRM_CREATE, p));
          ::munmap(p, 4096);
          break;
        }
        case Race: {
          char b;
          if (::read(go, &b, 1) != 1) {
            r = -EPIPE;
            break;
          }
          for (std::uint32_t i = 0; i < c.region; ++i) {
            tally_testdrm_create a{c.bytes, TALLY_TESTDRM_REGION_GTT, 0};
            if (::ioctl(drm, DRM_IOCTL_TALLY_TESTDRM_CREATE, &a) == 0) ++r;
          }
          break;
        }
        case Self:
          r = ::getpid();
          break;
        case KfdMapOn: {
          tally_testkfd_alloc_memory_of_gpu a{};
          a.size = c.bytes;
          a.flags = TALLY_TESTKFD_ALLOC_GTT;
          a.va_addr = 1ull << 40;
          r = result(::ioctl(kfd, AMDKFD_IOC_TALLY_ALLOC_MEMORY_OF_GPU, &a));
          if (r != 0) break;
          std::vector<std::uint32_t> ids(c.region, 1);
          tally_testkfd_map_memory_to_gpu m{};
          m.handle = a.handle;
          m.device_ids_array_ptr = reinterpret_cast<std::uintptr_t>(ids.data());
          m.n_devices = c.region;
          r = result(::ioctl(kfd, AMDKFD_IOC_TALLY_MAP_MEMORY_TO_GPU, &m));
          break;
        }
        case Close:
          r = result(::close(drm));
          drm = -1;
          break;
        case SendFd:  // parks the DRM fd in the socket, then closes its own
          r = testing::sendFd(sock, drm);
          ::close(drm);
          drm = -1;
          break;
        case RecvFd: {
          int fd = testing::recvFd(sock);
          r = fd < 0 ? fd : 0;
          if (fd >= 0) drm = fd;
          break;
        }
        case Loop: {  // `bytes` times: create `region` pages (1 at least), close; ns per pair
          timespec t0{}, t1{};
          ::clock_gettime(CLOCK_MONOTONIC, &t0);
          for (std::uint64_t i = 0; i < c.bytes; ++i) {
            tally_testdrm_create a{4096ull * (c.region ? c.region : 1), 0, 0};
            if (::ioctl(drm, DRM_IOCTL_TALLY_TESTDRM_CREATE, &a) != 0) {
              r = -errno;
              break;
            }
            std::uint32_t closeArgs[2] = {a.handle, 0};  // struct drm_gem_close
            (void)::ioctl(drm, _IOW('d', 0x09, std::uint64_t), closeArgs);
          }
          ::clock_gettime(CLOCK_MONOTONIC, &t1);
          if (r == 0)
            r = ((t1.tv_sec - t0.tv_sec) * 1'000'000'000 + (t1.tv_nsec - t0.tv_nsec)) /
                static_cast<std::int64_t>(c.bytes);
          break;
        }
        case Quit:
          if (::write(out, &r, sizeof r) != sizeof r) {
          }  // the test is gone: nothing to tell
          return;
        default:
          r = -EINVAL;
      }
      if (::write(out, &r, sizeof r) != sizeof r) return;
    }
  }

  pid_t pid_ = -1;
  int cmd_ = -1, reply_ = -1;
};

class VmKernelCharge : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(std::getenv("TALLY_IN_VM"), nullptr)
        << "this test needs the VM harness: vm/run.sh -- tally_vm_tests";
    loadDriver("");
    removePins();
    load();
  }
  void TearDown() override {
    charge_.reset();
    removePins();
    for (auto d = cgroups_.rbegin(); d != cgroups_.rend(); ++d)
      ::rmdir(d->c_str());  // children first
  }
  // `sizing`: the maps' room (the host's by default).
  void load(std::optional<bpf::Sizing> sizing = std::nullopt) {
    auto sys = fs::Root::open("/sys");
    ASSERT_TRUE(sys);
    bpf::LoadOptions o;
    o.pinDir = "/sys/fs/bpf/tally-test";
    o.devices = bpf::discoverDeviceRules(*sys);
    if (sizing) o.sizing = *sizing;
    auto st = bpf::startKernelCharge(*sys, o);
    ASSERT_TRUE(st.charge) << bpf::describe(st.verdict);
    EXPECT_TRUE(st.verdict.can.refusing) << bpf::describe(st.verdict);
    charge_ = std::move(st.charge);
  }
  std::string cgroup(const std::string& name) {
    cgroups_.push_back(makeCgroup(name));
    return cgroups_.back();
  }
  bpf::LeaseCharge read(std::uint64_t id) {
    auto c = charge_->read(id);
    EXPECT_TRUE(c) << "cgroup " << id << " is not armed";
    return c.value_or(bpf::LeaseCharge{});
  }

  std::unique_ptr<bpf::KernelCharge> charge_;
  std::vector<std::string> cgroups_;
};

}  // namespace tally::vmcharge
