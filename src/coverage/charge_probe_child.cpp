#include "coverage/charge_probe_child.h"

#include <amdgpu_drm.h>
#include <drm.h>
#include <drm_mode.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "tally_testdrm_uapi.h"

namespace tally::coverage::charge_probe {
namespace {

constexpr std::uint64_t kDumbRowBytes = 1024 * 4;  // a dumb buffer's row: 1024 pixels of 32 bits
static_assert(kDumbRowBytes == kPage, "N whole pages is a whole number of dumb rows");

// KFD's AMDKFD_IOC_ACQUIRE_VM (linux/kfd_ioctl.h: struct kfd_ioctl_acquire_vm_args
// { u32 drm_fd, gpu_id }, _IOW('K', 0x15)): the real driver binds a process to a
// GPU through a render node's VM before it allocates there. Spelled out, as the
// test driver's header spells ALLOC_MEMORY_OF_GPU (linux/kfd_ioctl.h includes a
// <drm/drm.h> Debian ships as libdrm's).
struct KfdAcquireVm {
  std::uint32_t drmFd;
  std::uint32_t gpuId;
};
constexpr unsigned long kKfdAcquireVm = _IOW('K', 0x15, KfdAcquireVm);
constexpr std::uint32_t kKfdAllocWritable = 1u << 31;  // KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE
// The address KFD buffers are given (never mapped: any address outside the
// process's SVM ranges will do).
constexpr std::uint64_t kKfdVa = 1ULL << 40;

int mapTestBuffer(int fd, std::uint32_t handle) {
  tally_testdrm_map m{handle, 0};
  return ::ioctl(fd, DRM_IOCTL_TALLY_TESTDRM_MAP, &m) == 0 ? 0 : -errno;
}

// One allocation of `bytes` on the path; 0 or -errno.
int allocate(const Plan& plan, int fd, std::uint64_t bytes) {
  switch (plan.result.path) {
    case ChargePath::AmdgpuGtt:
    case ChargePath::AmdgpuVram: {
      // Valid in every VM (a per-VM buffer): amdgpu before its runtime-stats
      // rework (~6.14) shows in fdinfo only buffers on a VM's lists, which a
      // per-VM buffer is from creation, with no mapping (a mapping makes
      // page tables, which would be charged and counted too).
      drm_amdgpu_gem_create c{};
      c.in.bo_size = bytes;
      c.in.alignment = kPage;
      c.in.domains = plan.result.path == ChargePath::AmdgpuGtt ? AMDGPU_GEM_DOMAIN_GTT
                                                               : AMDGPU_GEM_DOMAIN_VRAM;
      c.in.domain_flags = AMDGPU_GEM_CREATE_VM_ALWAYS_VALID;
      if (::ioctl(fd, DRM_IOCTL_AMDGPU_GEM_CREATE, &c) != 0) return -errno;
      return plan.testDriver ? mapTestBuffer(fd, c.out.handle) : 0;
    }
    case ChargePath::KfdGtt:
    case ChargePath::KfdVram: {
      tally_testkfd_alloc_memory_of_gpu a{};
      a.va_addr = kKfdVa;
      a.size = bytes;
      a.gpu_id = plan.gpuId;
      a.flags = (plan.result.path == ChargePath::KfdGtt ? TALLY_TESTKFD_ALLOC_GTT
                                                        : TALLY_TESTKFD_ALLOC_VRAM) |
                kKfdAllocWritable;
      return ::ioctl(fd, AMDKFD_IOC_TALLY_ALLOC_MEMORY_OF_GPU, &a) == 0 ? 0 : -errno;
    }
    case ChargePath::Dumb: {
      drm_mode_create_dumb c{};
      c.width = 1024;
      c.bpp = 32;
      c.height = static_cast<std::uint32_t>(bytes / kDumbRowBytes);
      if (::ioctl(fd, DRM_IOCTL_MODE_CREATE_DUMB, &c) != 0) return -errno;
      // The test driver's MAP shares xe's GEM_CREATE number: not under xe.
      return plan.testDriver && plan.kind != TALLY_DEVICE_XE ? mapTestBuffer(fd, c.handle) : 0;
    }
    case ChargePath::Xe: {
      tally_testdrm_xe_gem_create c{};
      c.size = bytes;
      c.placement = TALLY_TESTDRM_XE_PLACEMENT_SYSTEM;  // instance 0: system memory
      c.cpu_caching = TALLY_TESTDRM_XE_CPU_CACHING_WB;
      return ::ioctl(fd, DRM_IOCTL_TALLY_TESTDRM_XE_GEM_CREATE, &c) == 0 ? 0 : -errno;
    }
    case ChargePath::TestDrm: {
      tally_testdrm_create c{bytes, TALLY_TESTDRM_REGION_GTT, 0};
      if (::ioctl(fd, DRM_IOCTL_TALLY_TESTDRM_CREATE, &c) != 0) return -errno;
      return mapTestBuffer(fd, c.handle);
    }
  }
  return -EINVAL;
}

// Opens the path's node (and, for KFD on the real driver, acquires the render
// node's VM): the fd allocated on, or -errno. `renderFd` keeps the acquired
// node open.
int openPath(const Plan& plan, int& renderFd) {
  int fd = ::open(plan.result.node.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return -errno;
  if (!plan.acquireNode.empty()) {
    renderFd = ::open(plan.acquireNode.c_str(), O_RDWR | O_CLOEXEC);
    if (renderFd < 0) return -errno;
    KfdAcquireVm a{static_cast<std::uint32_t>(renderFd), plan.gpuId};
    if (::ioctl(fd, kKfdAcquireVm, &a) != 0) return -errno;
  }
  return fd;
}

}  // namespace

[[noreturn]] void child(int in, int out, const Plan& plan, std::uint64_t bytes) {
  auto reply = [&](std::int32_t v) { (void)!::write(out, &v, sizeof v); };
  char cmd = 0;
  int fd = -1, renderFd = -1;
  while (::read(in, &cmd, 1) == 1) {
    switch (cmd) {
      case 'o':
        fd = openPath(plan, renderFd);
        reply(fd);
        break;
      case 'a':
        reply(fd < 0 ? -EBADF : allocate(plan, fd, bytes));
        break;
      default:
        ::_exit(0);
    }
  }
  ::_exit(0);
}

std::optional<std::int32_t> await(int fd, int timeoutMs) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, timeoutMs) != 1) return std::nullopt;
  std::int32_t v = 0;
  if (::read(fd, &v, sizeof v) != sizeof v) return std::nullopt;
  return v;
}

// The child, once told to go: waited for, and killed when it does not end
// in `ms` (stuck in a driver's ioctl, say).
void reap(pid_t pid, int ms) {
  int status = 0;
  for (int waited = 0; ::waitpid(pid, &status, WNOHANG) == 0; waited += 10) {
    if (waited >= ms) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return;
    }
    ::usleep(10'000);
  }
}

}  // namespace tally::coverage::charge_probe
