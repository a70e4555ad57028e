#include "coverage/active_probe.h"

#include <amdgpu_drm.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "cgroup/cgroup.h"
#include "devices/driver_catalogue.h"
#include "probes/cgroup_memory.h"
#include "probes/drm_fdinfo.h"
#include "probes/sysfs_value.h"
#include "tally_testdrm_uapi.h"
#include "util/text.h"
#include "util/unique_fd.h"

namespace tally::coverage {
namespace {

constexpr const char* kTestDrm = "tally_testdrm";

// amdgpu before its runtime-stats rework (~6.14) counts in drm-total-gtt only the
// buffers on a VM list: a buffer never mapped into the GPU's address space would
// leave fdinfo unmoved and the probe inconclusive. So the probe maps it, at the
// bottom of the VM's user range (the address need only be valid, never used).
int mapIntoGpuVm(int fd, std::uint32_t handle, std::uint64_t bytes) {
  drm_amdgpu_info_device info{};
  drm_amdgpu_info request{};
  request.return_pointer = reinterpret_cast<std::uintptr_t>(&info);
  request.return_size = sizeof info;
  request.query = AMDGPU_INFO_DEV_INFO;
  if (::ioctl(fd, DRM_IOCTL_AMDGPU_INFO, &request) != 0) return -errno;
  drm_amdgpu_gem_va va{};
  va.handle = handle;
  va.operation = AMDGPU_VA_OP_MAP;
  va.flags = AMDGPU_VM_PAGE_READABLE | AMDGPU_VM_PAGE_WRITEABLE;
  va.va_address = info.virtual_address_offset;
  va.offset_in_bo = 0;
  va.map_size = bytes;
  return ::ioctl(fd, DRM_IOCTL_AMDGPU_GEM_VA, &va) == 0 ? 0 : -errno;
}

// In the child: one GTT buffer of `bytes`, resident, touched and mapped into the
// GPU's address space.
int allocateGtt(int fd, const std::string& driver, std::uint64_t bytes) {
  const devices::DriverRow* row = devices::findDriver(driver);
  if (row && row->gttProbe == devices::GttProbe::TestDrm) {
    tally_testdrm_create c{bytes, TALLY_TESTDRM_REGION_GTT, 0};  // pages allocated at creation
    if (::ioctl(fd, DRM_IOCTL_TALLY_TESTDRM_CREATE, &c) != 0) return -errno;
    tally_testdrm_map m{c.handle, 0};
    return ::ioctl(fd, DRM_IOCTL_TALLY_TESTDRM_MAP, &m) == 0 ? 0 : -errno;
  }
  // amdgpu: create in the GTT domain, write every page through a CPU mapping (TTM
  // populates on first touch; the charge, if any, lands on the task that
  // populates), then map it into the GPU VM.
  bytes = (bytes + 4095) & ~std::uint64_t{4095};
  drm_amdgpu_gem_create create{};
  create.in.bo_size = bytes;
  create.in.alignment = 4096;
  create.in.domains = AMDGPU_GEM_DOMAIN_GTT;
  if (::ioctl(fd, DRM_IOCTL_AMDGPU_GEM_CREATE, &create) != 0) return -errno;
  drm_amdgpu_gem_mmap map{};
  map.in.handle = create.out.handle;
  if (::ioctl(fd, DRM_IOCTL_AMDGPU_GEM_MMAP, &map) != 0) return -errno;
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                   static_cast<off_t>(map.out.addr_ptr));
  if (p == MAP_FAILED) return -errno;
  std::memset(p, 0x5a, bytes);
  return mapIntoGpuVm(fd, create.out.handle, bytes);
}

[[noreturn]] void child(int in, int out, const std::string& node, const std::string& driver,
                        std::uint64_t bytes) {
  char cmd = 0;
  auto reply = [&](std::int32_t v) { (void)!::write(out, &v, sizeof v); };
  if (::read(in, &cmd, 1) != 1 || cmd != 'o') ::_exit(1);
  int fd = ::open(node.c_str(), O_RDWR | O_CLOEXEC);
  reply(fd >= 0 ? fd : -errno);
  if (fd < 0) ::_exit(1);
  if (::read(in, &cmd, 1) != 1 || cmd != 'a') ::_exit(1);
  reply(allocateGtt(fd, driver, bytes));
  (void)!::read(in, &cmd, 1);  // hold the buffer until the parent has read
  ::_exit(0);
}

std::optional<std::int32_t> await(int fd, int timeoutMs) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, timeoutMs) != 1) return std::nullopt;
  std::int32_t v = 0;
  if (::read(fd, &v, sizeof v) != sizeof v) return std::nullopt;
  return v;
}

struct Reading {
  std::optional<std::uint64_t> current, gtt, gpuActive;
  std::string gttKey;  // the fdinfo key gtt came from
};

Reading readNow(const fs::Root& proc, const cgroup::Cgroup& cg, pid_t pid, int fd) {
  Reading r;
  if (auto c = cg.memoryCurrent()) r.current = *c;
  if (auto s = cg.memoryStat()) r.gpuActive = s->get("gpu_active");
  if (auto t = proc.read(fmt::format("{}/fdinfo/{}", pid, fd), 64 * 1024)) {
    auto info = probes::parseDrmFdinfo(*t);
    // drm-total-gtt since 6.5's common helper; amdgpu printed drm-memory-gtt before.
    if (const auto* g = info.region("gtt")) {
      if (g->total) {
        r.gtt = g->total;
        r.gttKey = "drm-total-gtt";
      } else if (g->memory) {
        r.gtt = g->memory;
        r.gttKey = "drm-memory-gtt";
      }
    }
  }
  return r;
}

std::optional<std::int64_t> delta(const std::optional<std::uint64_t>& a,
                                  const std::optional<std::uint64_t>& b) {
  if (!a || !b) return std::nullopt;
  return static_cast<std::int64_t>(*b) - static_cast<std::int64_t>(*a);
}

}  // namespace

bool hasProbe(const std::string& driver) {
  const devices::DriverRow* row = devices::findDriver(driver);
  return row && row->gttProbe != devices::GttProbe::None;
}

// The test driver's platform device has no driver link; its name says it.
std::string probeDriver(const devices::DrmDevice& d) {
  return d.driver.empty() && d.key == kTestDrm ? kTestDrm : d.driver;
}

ProbeResult runActiveProbe(const fs::Root& proc, const fs::Root& cgroupRoot,
                           const devices::DeviceMap& devices, const std::string& kernel,
                           const ProbeOptions& o) {
  ProbeResult r;
  r.kernel = kernel;
  r.requestedBytes = o.bytes;
  const devices::DrmDevice* dev = nullptr;
  std::string node;
  std::vector<std::string> seen;
  for (const auto& d : devices.devices) {
    seen.push_back(fmt::format("{} ({})", d.key, d.driver.empty() ? "no driver" : d.driver));
    if (dev || !hasProbe(probeDriver(d))) continue;
    for (const auto& n : d.nodes) {
      if (n.isRender()) {
        dev = &d;
        node = fmt::format("{}/{}", o.devDir, n.name);
        break;
      }
    }
  }
  if (!dev) {
    r.outcome = ProbeOutcome::NoProbe;
    r.detail = seen.empty() ? "no DRM device"
                            : fmt::format("no probe for this driver: {}", fmt::join(seen, ", "));
    return r;
  }
  r.device = dev->key;
  r.driver = probeDriver(*dev);
  if (::geteuid() != 0) {
    r.detail = "the active probe needs root (it creates a cgroup and moves a process into it)";
    return r;
  }
  auto parentCg = cgroup::Cgroup::open(cgroupRoot, o.cgroupParent.empty() ? "/" : o.cgroupParent);
  auto memory = parentCg ? parentCg->delegates("memory") : Result<bool>(parentCg.error());
  if (!memory || !*memory) {
    r.detail = fmt::format(
        "memory is not enabled in {}; the probe cannot measure a child cgroup there",
        cgroupRoot.describe(fs::joinPath(o.cgroupParent, cgroup::file::kSubtreeControl)));
    return r;
  }
  std::string parent = o.cgroupParent;
  while (parent.size() > 1 && parent.back() == '/') parent.pop_back();
  if (parent.empty() || parent[0] != '/') {
    r.detail = fmt::format("--probe-cgroup '{}' must be an absolute cgroup path", o.cgroupParent);
    return r;
  }
  r.cgroup = (parent == "/" ? "" : parent) + fmt::format("/tally-probe-{}", ::getpid());
  std::string rel = r.cgroup.substr(1);
  if (::mkdirat(cgroupRoot.fd(), rel.c_str(), 0755) != 0) {
    r.detail = fmt::format("mkdir {}: {}", cgroupRoot.describe(rel), std::strerror(errno));
    return r;
  }
  int toChild[2], fromChild[2];
  if (::pipe2(toChild, O_CLOEXEC) != 0 || ::pipe2(fromChild, O_CLOEXEC) != 0) {
    r.detail = fmt::format("pipe: {}", std::strerror(errno));
    ::unlinkat(cgroupRoot.fd(), rel.c_str(), AT_REMOVEDIR);
    return r;
  }
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(toChild[1]);
    ::close(fromChild[0]);
    child(toChild[0], fromChild[1], node, r.driver, o.bytes);
  }
  ::close(toChild[0]);
  ::close(fromChild[1]);
  UniqueFd out(toChild[1]), in(fromChild[0]);
  auto probeCg = cgroup::Cgroup::open(cgroupRoot, r.cgroup);
  auto send = [&](char c) { return ::write(out.get(), &c, 1) == 1; };
  auto fail = [&](std::string why) {
    r.outcome = ProbeOutcome::Failed;
    r.detail = std::move(why);
  };
  if (pid < 0) {
    fail(fmt::format("fork: {}", std::strerror(errno)));
  } else if (!probeCg) {
    fail(fmt::format("opening {}: {}", r.cgroup, probeCg.error().message));
  } else if (auto s = probeCg->addProcess(pid); !s) {
    fail(fmt::format("moving the probe into {}: {}", r.cgroup, s.error().message));
  } else if (auto fd = (send('o'), await(in.get(), o.stepTimeoutMs)); !fd || *fd < 0) {
    fail(fd ? fmt::format("open {}: {}", node, std::strerror(-*fd))
            : "the probe child did not answer");
  } else {
    Reading before = readNow(proc, *probeCg, pid, *fd);
    auto rc = (send('a'), await(in.get(), o.stepTimeoutMs));
    if (!rc || *rc != 0) {
      fail(rc ? fmt::format("allocating and mapping {} bytes of GTT on {}: {}", o.bytes, node,
                            std::strerror(-*rc))
              : "the probe child did not answer");
    } else {
      Reading after = readNow(proc, *probeCg, pid, *fd);
      r.deltaMemoryCurrent = delta(before.current, after.current);
      r.deltaDrmTotalGtt = delta(before.gtt, after.gtt);
      r.gttKey = after.gttKey;
      r.deltaGpuActive = delta(before.gpuActive, after.gpuActive);
      if (!r.deltaMemoryCurrent || !r.deltaDrmTotalGtt) {
        fail(fmt::format(
            "could not read {} ({}{}) and the probe's fdinfo (drm-total-gtt or drm-memory-gtt{})",
            r.cgroup, cgroup::file::kMemoryCurrent, r.deltaMemoryCurrent ? " ok" : " missing",
            r.deltaDrmTotalGtt ? " ok" : " missing"));
      } else {
        r.outcome = judgeProbe(o.bytes, *r.deltaMemoryCurrent, *r.deltaDrmTotalGtt, r.detail);
      }
    }
  }
  if (pid > 0) {
    send('x');
    out.reset();
    int status = 0;
    ::waitpid(pid, &status, 0);
  }
  // The cgroup empties asynchronously after the child is reaped.
  for (int i = 0;
       i < 100 && ::unlinkat(cgroupRoot.fd(), rel.c_str(), AT_REMOVEDIR) != 0 && errno == EBUSY;
       ++i)
    ::usleep(10'000);
  return r;
}

}  // namespace tally::coverage
