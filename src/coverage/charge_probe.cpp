#include "coverage/charge_probe.h"

#include <amdgpu_drm.h>
#include <drm.h>
#include <drm_mode.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include "bpf/gpu_charge_abi.h"
#include "bpf/kernel_charge_bpf.h"
#include "cgroup/cgroup.h"
#include "coverage/active_probe.h"
#include "probes/drm_fdinfo.h"
#include "probes/sysfs_value.h"
#include "tally_testdrm_uapi.h"
#include "util/text.h"
#include "util/unique_fd.h"

namespace tally::coverage {
namespace {

using json = nlohmann::ordered_json;

constexpr std::uint64_t kPage = 4096;
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

std::string errnoName(int e) {
  const char* n = ::strerrorname_np(e);
  return n ? n : fmt::format("errno {}", e);
}

std::string errnoWords(int e) { return fmt::format("{} ({})", errnoName(e), std::strerror(e)); }

std::string figureWords(const char* name, const Figure& f) {
  if (f.bytes) {
    return f.source.empty() ? fmt::format("{} {}", name, *f.bytes)
                            : fmt::format("{} {} ({})", name, *f.bytes, f.source);
  }
  return fmt::format("{} absent ({})", name, f.absent.empty() ? "not read" : f.absent);
}

}  // namespace

const char* chargePathName(ChargePath p) {
  switch (p) {
    case ChargePath::AmdgpuGtt:
      return "amdgpu-gem-create-gtt";
    case ChargePath::AmdgpuVram:
      return "amdgpu-gem-create-vram";
    case ChargePath::KfdGtt:
      return "kfd-alloc-gtt";
    case ChargePath::KfdVram:
      return "kfd-alloc-vram";
    case ChargePath::Dumb:
      return "dumb";
    case ChargePath::Xe:
      return "xe-gem-create";
    case ChargePath::TestDrm:
      return "testdrm-create";
  }
  return "?";
}

const char* chargePathWords(ChargePath p) {
  switch (p) {
    case ChargePath::AmdgpuGtt:
      return "amdgpu GEM_CREATE (GTT)";
    case ChargePath::AmdgpuVram:
      return "amdgpu GEM_CREATE (VRAM)";
    case ChargePath::KfdGtt:
      return "KFD ALLOC_MEMORY_OF_GPU (GTT)";
    case ChargePath::KfdVram:
      return "KFD ALLOC_MEMORY_OF_GPU (VRAM)";
    case ChargePath::Dumb:
      return "MODE_CREATE_DUMB";
    case ChargePath::Xe:
      return "xe GEM_CREATE";
    case ChargePath::TestDrm:
      return "tally_testdrm CREATE";
  }
  return "?";
}

const char* chargeProbeOutcomeName(ChargeProbeOutcome o) {
  switch (o) {
    case ChargeProbeOutcome::Ran:
      return "ran";
    case ChargeProbeOutcome::Unavailable:
      return "unavailable";
    case ChargeProbeOutcome::Failed:
      return "failed";
  }
  return "failed";
}

ChargeVerdict judgeCharge(const PathResult& p) {
  ChargeVerdict v;
  if (!p.charge) {
    v.words = "the lease's charge could not be read";
    return v;
  }
  const std::int64_t charge = *p.charge;
  if (p.fdinfo.bytes) {
    v.compared = "fdinfo";
    v.against = *p.fdinfo.bytes;
  } else if (p.memInfo.bytes) {
    v.compared = "mem_info";
    v.against = *p.memInfo.bytes;
  } else {
    v.compared = "requested";
    v.against = static_cast<std::int64_t>(p.requestedBytes);
  }
  v.difference = charge - v.against;
  v.judgement = v.difference == 0 ? ChargeJudgement::Exact : ChargeJudgement::Differs;
  // mem_info is the device's, every client's: beside a per-client figure it
  // is shown, and said device-wide when it moved otherwise.
  std::string memInfo = figureWords("mem_info", p.memInfo);
  if (p.memInfo.bytes && *p.memInfo.bytes != charge && v.compared != "mem_info")
    memInfo += " (device-wide: other clients move it)";
  if (v.judgement == ChargeJudgement::Exact) {
    if (v.compared == "fdinfo") {
      v.words = fmt::format("charged exactly: charge {} = {}; {}", charge,
                            figureWords("fdinfo", p.fdinfo), memInfo);
    } else if (v.compared == "mem_info") {
      v.words = fmt::format("charged exactly: charge {} = {} (device-wide); {}", charge,
                            figureWords("mem_info", p.memInfo), figureWords("fdinfo", p.fdinfo));
    } else {
      v.words = fmt::format(
          "charged exactly: charge {} = the size asked, page-aligned (no driver figure: {}; {})",
          charge, figureWords("fdinfo", p.fdinfo), memInfo);
    }
  } else {
    const std::int64_t by = v.difference < 0 ? -v.difference : v.difference;
    v.words = fmt::format("differs by {} bytes (charge {}, {}, {}; held to {})", by, charge,
                          figureWords("fdinfo", p.fdinfo), memInfo,
                          v.compared == "requested" ? "the size asked, page-aligned" : v.compared);
  }
  return v;
}

RefusalVerdict judgeRefusal(const PathResult& p) {
  RefusalVerdict v;
  if (p.refusalNotTried) {
    v.words = fmt::format("refusal not tried: {}", *p.refusalNotTried);
    return v;
  }
  if (!p.tryRc) {
    v.words = "refusal not tried: the probe did not get that far";
    return v;
  }
  v.judgement = RefusalJudgement::NotRefused;
  const int rc = *p.tryRc;
  const std::uint64_t asked = p.requestedBytes;
  if (rc == 0) {
    v.words = fmt::format("not refused: the driver made it (charge {} + {} over bound {})",
                          p.chargeAtBound, asked, p.boundBytes);
  } else if (rc != -ENOMEM) {
    v.words = fmt::format("not refused: the driver answered {} (the bound was not what stopped it)",
                          errnoWords(-rc));
  } else if (p.refusedDelta == 0) {
    v.words =
        "not refused by the kernel bound: the driver answered ENOMEM itself (the lease's refusal "
        "count did not move)";
  } else if (p.failsafeDelta > 0) {
    v.words = fmt::format("not refused at the bound: refused failing closed ({})",
                          p.failsafeReason.empty() ? "its reason unread" : p.failsafeReason);
  } else if (p.chargeAfterTry != p.chargeAtBound) {
    v.words = fmt::format("refused, but the charge moved from {} to {}", p.chargeAtBound,
                          p.chargeAfterTry);
  } else {
    v.judgement = RefusalJudgement::Refused;
    v.words = fmt::format(
        "refused at the bound (ENOMEM: charge {} + {} over bound {}; the charge "
        "stayed {})",
        p.chargeAtBound, asked, p.boundBytes, p.chargeAfterTry);
  }
  return v;
}

std::string pathLine(const PathResult& p) {
  if (!p.present) return fmt::format("not present ({})", p.notPresent);
  if (p.failed) return fmt::format("could not be probed: {}", *p.failed);
  return fmt::format("{}; {}", judgeCharge(p).words, judgeRefusal(p).words);
}

bool pathFinding(const PathResult& p) {
  if (!p.present || p.failed) return false;
  return judgeCharge(p).judgement == ChargeJudgement::Differs ||
         judgeRefusal(p).judgement == RefusalJudgement::NotRefused;
}

bool ChargeProbeResult::anyFinding() const {
  return std::any_of(paths.begin(), paths.end(), pathFinding);
}

bool ChargeProbeResult::anyPathFailed() const {
  return std::any_of(paths.begin(), paths.end(),
                     [](const PathResult& p) { return p.present && p.failed; });
}

json pathJson(const PathResult& p) {
  json j;
  j["path"] = chargePathName(p.path);
  j["what"] = chargePathWords(p.path);
  j["present"] = p.present;
  if (!p.present) {
    j["not_present"] = p.notPresent;
    j["line"] = pathLine(p);
    return j;
  }
  j["device"] = p.device;
  j["node"] = p.node;
  j["requested_bytes"] = p.requestedBytes;
  if (p.failed) j["failed"] = *p.failed;
  auto figure = [&](const char* name, const Figure& f) {
    if (f.bytes) {
      j[fmt::format("{}_delta_bytes", name)] = *f.bytes;
      if (!f.source.empty()) j[fmt::format("{}_source", name)] = f.source;
    } else {
      j[fmt::format("{}_absent", name)] = f.absent.empty() ? "not read" : f.absent;
    }
  };
  if (p.charge)
    j["charge_delta_bytes"] = *p.charge;
  else
    j["charge_absent"] = "the lease's charge could not be read";
  figure("fdinfo", p.fdinfo);
  figure("mem_info", p.memInfo);
  if (!p.failed) {
    auto c = judgeCharge(p);
    j["charge"] = c.judgement == ChargeJudgement::Exact     ? "exact"
                  : c.judgement == ChargeJudgement::Differs ? "differs"
                                                            : "unknown";
    if (c.judgement != ChargeJudgement::Unknown) {
      j["compared_with"] = c.compared;
      j["difference_bytes"] = c.difference;
    }
    auto r = judgeRefusal(p);
    j["refusal"] = r.judgement == RefusalJudgement::Refused      ? "refused"
                   : r.judgement == RefusalJudgement::NotRefused ? "not-refused"
                                                                 : "not-tried";
    if (p.refusalNotTried) {
      j["refusal_not_tried"] = *p.refusalNotTried;
    } else if (p.tryRc) {
      j["bound_bytes"] = p.boundBytes;
      j["charge_at_bound_bytes"] = p.chargeAtBound;
      j["charge_after_try_bytes"] = p.chargeAfterTry;
      j["try_errno"] = *p.tryRc == 0 ? json(nullptr) : json(errnoName(-*p.tryRc));
      j["refused_count_delta"] = p.refusedDelta;
      j["refused_failsafe_delta"] = p.failsafeDelta;
      if (!p.failsafeReason.empty()) j["failsafe_reason"] = p.failsafeReason;
    }
  }
  j["line"] = pathLine(p);
  return j;
}

json chargeProbeJson(const ChargeProbeResult& r) {
  json j;
  j["outcome"] = chargeProbeOutcomeName(r.outcome);
  if (!r.detail.empty()) j["detail"] = r.detail;
  if (r.outcome == ChargeProbeOutcome::Unavailable) return j;
  if (!r.source.empty()) j["programs"] = r.source;
  j["refusing"] = r.refusing;
  if (!r.cgroup.empty()) {
    j["cgroup"] = r.cgroup;
    j["cgroup_id"] = r.cgroupId;
  }
  j["requested_bytes"] = r.bytes;
  json paths = json::array();
  for (const auto& p : r.paths) paths.push_back(pathJson(p));
  j["paths"] = paths;
  return j;
}

namespace {

// How a path is probed: the node its child allocates on, where its figures
// come from.
struct Plan {
  PathResult result;
  std::uint32_t kind = TALLY_DEVICE_OTHER_DRM;  // the device kind the node is registered as
  std::string fdinfoAbsent;  // set: the path's client shows no fdinfo figure, and why
  std::string sysNode;       // class/drm/<node>: where its device's mem_info_* are
  std::string acquireNode;   // KFD on the real driver: the render node whose VM it acquires
  std::uint32_t gpuId = 0;
  bool testDriver = false;  // the VM's tally_testdrm: its own MAP shows a buffer in fdinfo
  bool realAmdgpu = false;  // amdgpu itself (not the test driver playing it)
};

std::optional<bpf::DeviceRule> ruleOf(const std::vector<bpf::DeviceRule>& rules,
                                      const devices::DrmNode& n) {
  for (const auto& r : rules)
    if (r.major == n.major && r.minor == n.minor) return r;
  return std::nullopt;
}

// The device kind a DRM device is registered as (its first DRM node's rule).
std::optional<bpf::DeviceRule> deviceRule(const std::vector<bpf::DeviceRule>& rules,
                                          const devices::DrmDevice& d) {
  for (const auto& n : d.nodes)
    if (n.major == devices::kDrmMajor)
      if (auto r = ruleOf(rules, n)) return r;
  return std::nullopt;
}

const devices::DrmNode* nodeOf(const devices::DrmDevice& d, bool render) {
  for (const auto& n : d.nodes)
    if (n.major == devices::kDrmMajor && n.isRender() == render) return &n;
  return nullptr;
}

const char* kindName(std::uint32_t kind) {
  switch (kind) {
    case TALLY_DEVICE_AMDGPU:
      return "amdgpu";
    case TALLY_DEVICE_XE:
      return "xe";
    case TALLY_DEVICE_TESTDRM:
      return "tally_testdrm";
    case TALLY_DEVICE_KFD:
      return "kfd";
    default:
      return "another driver";
  }
}

std::string seenDevices(const devices::DeviceMap& devices,
                        const std::vector<bpf::DeviceRule>& rules) {
  std::vector<std::string> seen;
  for (const auto& d : devices.devices) {
    auto r = deviceRule(rules, d);
    std::string driver = r && r->kind != TALLY_DEVICE_OTHER_DRM ? kindName(r->kind)
                         : d.driver.empty()                     ? "no driver"
                                                                : d.driver;
    seen.push_back(fmt::format("{} ({})", d.key, driver));
  }
  return seen.empty() ? "no DRM device" : fmt::format("devices: {}", fmt::join(seen, ", "));
}

Plan onDevice(ChargePath path, const devices::DrmDevice& d, const devices::DrmNode& n,
              std::uint32_t kind, const ChargeProbeOptions& o) {
  Plan p;
  p.result.path = path;
  p.result.present = true;
  p.result.device = d.key;
  p.result.node = fmt::format("{}/{}", o.devDir, n.name);
  p.kind = kind;
  p.sysNode = fmt::format("class/drm/{}", n.name);
  p.testDriver = probeDriver(d) == "tally_testdrm";
  p.realAmdgpu = kind == TALLY_DEVICE_AMDGPU && !p.testDriver;
  return p;
}

Plan absent(ChargePath path, std::string why) {
  Plan p;
  p.result.path = path;
  p.result.notPresent = std::move(why);
  return p;
}

// The first device registered as `kind` with a render node.
std::optional<Plan> onKind(ChargePath path, std::uint32_t kind, const devices::DeviceMap& devices,
                           const std::vector<bpf::DeviceRule>& rules, const ChargeProbeOptions& o) {
  for (const auto& d : devices.devices) {
    auto r = deviceRule(rules, d);
    const auto* render = nodeOf(d, true);
    if (r && r->kind == kind && render) return onDevice(path, d, *render, kind, o);
  }
  return std::nullopt;
}

// KFD's first GPU node: its gpu_id and render minor (topology/nodes/N/gpu_id,
// properties' drm_render_minor).
struct KfdGpu {
  std::uint32_t gpuId = 0;
  std::uint32_t renderMinor = 0;
};
std::optional<KfdGpu> kfdGpu(const fs::Root& sys, std::string& why) {
  const std::string dir = "class/kfd/kfd/topology/nodes";
  auto nodes = sys.list(dir);
  if (!nodes) {
    why = fmt::format("no KFD topology ({})", sys.describe(dir));
    return std::nullopt;
  }
  std::sort(nodes->begin(), nodes->end());
  for (const auto& n : *nodes) {
    auto id = sys.read(fmt::format("{}/{}/gpu_id", dir, n), 64);
    auto gpu = id ? text::parseU64(text::trim(*id)) : std::nullopt;
    if (!gpu || *gpu == 0 || *gpu > 0xffffffffULL) continue;  // 0: a CPU node
    auto props = sys.read(fmt::format("{}/{}/properties", dir, n), 64 * 1024);
    if (!props) continue;
    std::string_view rest = *props;
    while (!rest.empty()) {
      auto nl = rest.find('\n');
      std::string_view line = rest.substr(0, nl);
      rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
      constexpr std::string_view key = "drm_render_minor ";
      if (!text::startsWith(line, key)) continue;
      auto minor = text::parseU64(text::trim(line.substr(key.size())));
      if (minor && *minor < 0x100000)
        return KfdGpu{static_cast<std::uint32_t>(*gpu), static_cast<std::uint32_t>(*minor)};
    }
  }
  why = fmt::format("KFD's topology ({}) lists no GPU with a render node", sys.describe(dir));
  return std::nullopt;
}

std::vector<Plan> planPaths(const fs::Root& sys, const devices::DeviceMap& devices,
                            const std::vector<bpf::DeviceRule>& rules,
                            const ChargeProbeOptions& o) {
  std::vector<Plan> plans;
  const std::string seen = seenDevices(devices, rules);
  for (ChargePath path : {ChargePath::AmdgpuGtt, ChargePath::AmdgpuVram}) {
    auto p = onKind(path, TALLY_DEVICE_AMDGPU, devices, rules, o);
    plans.push_back(p ? std::move(*p) : absent(path, fmt::format("no amdgpu device ({})", seen)));
  }

  // KFD: /dev/kfd registered, and the GPU it allocates on.
  bool kfdRegistered = std::any_of(rules.begin(), rules.end(), [](const bpf::DeviceRule& r) {
    return r.kind == TALLY_DEVICE_KFD;
  });
  for (ChargePath path : {ChargePath::KfdGtt, ChargePath::KfdVram}) {
    if (!kfdRegistered) {
      plans.push_back(absent(path, fmt::format("no {}", o.kfdNode)));
      continue;
    }
    std::string why;
    Plan p;
    if (auto gpu = kfdGpu(sys, why)) {
      auto at = devices.byNode(devices::kDrmMajor, gpu->renderMinor);
      if (!at) {
        plans.push_back(absent(path, fmt::format("KFD's GPU {} has render minor {}, which no DRM "
                                                 "device here has",
                                                 gpu->gpuId, gpu->renderMinor)));
        continue;
      }
      const auto& d = devices.devices[*at];
      const auto* render = nodeOf(d, true);
      p = onDevice(path, d, *render, TALLY_DEVICE_KFD, o);
      p.gpuId = gpu->gpuId;
      p.acquireNode = p.result.node;
    } else {
      // The VM's test driver makes /dev/kfd itself (personality=amdgpu),
      // with no topology and no VM to acquire: its GPU is id 0.
      auto test = onKind(path, TALLY_DEVICE_AMDGPU, devices, rules, o);
      if (!test || !test->testDriver) {
        plans.push_back(absent(path, fmt::format("{} is there, but {}", o.kfdNode, why)));
        continue;
      }
      p = std::move(*test);
      p.kind = TALLY_DEVICE_KFD;
    }
    p.result.node = o.kfdNode;
    p.fdinfoAbsent =
        "KFD's buffers belong to the KFD process, not to a DRM file the probe holds: no client's "
        "fdinfo counts them here";
    plans.push_back(std::move(p));
  }

  // A dumb buffer, on the card node of a device whose buffers are charged.
  std::optional<Plan> dumb;
  for (const auto& d : devices.devices) {
    auto r = deviceRule(rules, d);
    const auto* card = nodeOf(d, false);
    if (dumb || !r || !r->charged || !card) continue;
    dumb = onDevice(ChargePath::Dumb, d, *card, r->kind, o);
  }
  plans.push_back(dumb ? std::move(*dumb)
                       : absent(ChargePath::Dumb,
                                fmt::format("no card node of a device whose buffers the kernel "
                                            "bound charges (amdgpu, xe, radeon, nouveau; {})",
                                            seen)));

  auto xe = onKind(ChargePath::Xe, TALLY_DEVICE_XE, devices, rules, o);
  plans.push_back(xe ? std::move(*xe)
                     : absent(ChargePath::Xe, fmt::format("no xe device ({})", seen)));

  auto test = onKind(ChargePath::TestDrm, TALLY_DEVICE_TESTDRM, devices, rules, o);
  if (test) {
    plans.push_back(std::move(*test));
  } else {
    std::string why = fmt::format("no device of tally's VM test driver playing itself ({})", seen);
    for (const auto& d : devices.devices)
      if (probeDriver(d) == "tally_testdrm")
        if (auto r = deviceRule(rules, d))
          why = fmt::format(
              "tally's VM test driver plays {} here: its own CREATE is decoded only when it plays "
              "itself",
              kindName(r->kind));
    plans.push_back(absent(ChargePath::TestDrm, why));
  }
  return plans;
}

// ---- the child: one path, one step per command ----

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

// ---- the parent's readings ----

// The client's fdinfo: per region, its total (drm-total-, or drm-memory- where
// amdgpu printed only that before 6.5, or drm-resident-), bytes.
struct FdinfoReading {
  std::map<std::string, std::pair<std::uint64_t, std::string>> regions;  // region -> bytes, key
  std::string absent;
};

FdinfoReading readFdinfo(const fs::Root& proc, pid_t pid, int fd) {
  FdinfoReading r;
  std::string rel = fmt::format("{}/fdinfo/{}", pid, fd);
  auto t = proc.read(rel, 64 * 1024);
  if (!t) {
    r.absent = fmt::format("cannot read {}: {}", proc.describe(rel), t.error().message);
    return r;
  }
  auto info = probes::parseDrmFdinfo(*t);
  for (const auto& [name, s] : info.regions) {
    if (s.total)
      r.regions[name] = {*s.total, "drm-total-" + name};
    else if (s.memory)
      r.regions[name] = {*s.memory, "drm-memory-" + name};
    else if (s.resident)
      r.regions[name] = {*s.resident, "drm-resident-" + name};
  }
  if (r.regions.empty())
    r.absent = fmt::format("the driver prints no memory figure in fdinfo ({})", proc.describe(rel));
  return r;
}

Figure fdinfoDelta(const FdinfoReading& before, const FdinfoReading& after) {
  Figure f;
  if (!before.absent.empty() || !after.absent.empty()) {
    f.absent = !after.absent.empty() ? after.absent : before.absent;
    return f;
  }
  std::int64_t sum = 0;
  std::vector<std::string> moved, read;
  for (const auto& [name, v] : after.regions) {
    auto b = before.regions.find(name);
    std::int64_t was = b == before.regions.end() ? 0 : static_cast<std::int64_t>(b->second.first);
    std::int64_t d = static_cast<std::int64_t>(v.first) - was;
    sum += d;
    read.push_back(v.second);
    if (d != 0) moved.push_back(v.second);
  }
  f.bytes = sum;
  f.source = fmt::format("{}", fmt::join(moved.empty() ? read : moved, "+"));
  return f;
}

struct MemInfoReading {
  std::optional<std::uint64_t> used;
  std::string source, absent;
};

MemInfoReading readMemInfo(const fs::Root& sys, const std::string& sysNode) {
  MemInfoReading r;
  std::vector<std::string> files;
  for (const char* region : {"gtt", "vram"}) {
    std::string rel = fmt::format("{}/device/mem_info_{}_used", sysNode, region);
    auto t = sys.read(rel, 64);
    if (!t) continue;
    auto v = probes::parseSysfsU64(*t);
    if (!v) {
      r.absent = fmt::format("{} is not a number", sys.describe(rel));
      r.used.reset();
      return r;
    }
    r.used = r.used.value_or(0) + *v;
    files.push_back(fmt::format("mem_info_{}_used", region));
  }
  if (!r.used)
    r.absent = fmt::format("the device exports no mem_info_*_used ({})",
                           sys.describe(sysNode + "/device"));
  r.source = fmt::format("{}", fmt::join(files, "+"));
  return r;
}

Figure memInfoDelta(const MemInfoReading& before, const MemInfoReading& after) {
  Figure f;
  if (!before.used || !after.used) {
    f.absent = !after.absent.empty() ? after.absent : before.absent;
    return f;
  }
  f.bytes = static_cast<std::int64_t>(*after.used) - static_cast<std::int64_t>(*before.used);
  f.source = after.source;
  return f;
}

std::uint64_t chargeBytes(const bpf::KernelCharge& k, std::uint64_t id) {
  auto c = k.read(id);
  return c ? c->bytes : 0;
}

// Until the lease's charge is back to `baseline` (the last path's buffers
// freed: KFD's go when its process is torn down), at most `ms`.
bool settle(const bpf::KernelCharge& k, std::uint64_t id, std::uint64_t baseline, int ms) {
  for (int waited = 0;; waited += 10) {
    if (chargeBytes(k, id) <= baseline) return true;
    if (waited >= ms) return false;
    ::usleep(10'000);
  }
}

void probePath(Plan& plan, const fs::Root& proc, const fs::Root& sys, const cgroup::Cgroup& probeCg,
               bpf::KernelCharge& charge, std::uint64_t id, bool ownPrograms,
               const std::string& refusingOff, const ChargeProbeOptions& o, std::uint64_t bytes) {
  PathResult& r = plan.result;
  r.requestedBytes = bytes;
  // Room for the first allocation.
  if (auto s = charge.arm(id, bpf::ArmSpec{chargeBytes(charge, id) + 2 * bytes}); !s) {
    r.failed = fmt::format("arming the probe's cgroup: {}", s.error().message);
    return;
  }
  int toChild[2], fromChild[2];
  if (::pipe2(toChild, O_CLOEXEC) != 0) {
    r.failed = fmt::format("pipe: {}", std::strerror(errno));
    return;
  }
  if (::pipe2(fromChild, O_CLOEXEC) != 0) {
    r.failed = fmt::format("pipe: {}", std::strerror(errno));
    ::close(toChild[0]);
    ::close(toChild[1]);
    return;
  }
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(toChild[1]);
    ::close(fromChild[0]);
    child(toChild[0], fromChild[1], plan, bytes);
  }
  ::close(toChild[0]);
  ::close(fromChild[1]);
  UniqueFd out(toChild[1]), in(fromChild[0]);
  auto send = [&](char c) { return ::write(out.get(), &c, 1) == 1; };
  auto step = [&](char c) -> std::optional<std::int32_t> {
    if (!send(c)) return std::nullopt;
    return await(in.get(), o.stepTimeoutMs);
  };
  if (pid < 0) {
    r.failed = fmt::format("fork: {}", std::strerror(errno));
    return;
  }
  auto fd = std::optional<std::int32_t>{};
  if (auto s = probeCg.addProcess(pid); !s) {
    r.failed = fmt::format("moving the probe's child into its cgroup: {}", s.error().message);
  } else if (fd = step('o'); !fd || *fd < 0) {
    r.failed = fd ? fmt::format("opening {}{}: {}", r.node,
                                plan.acquireNode.empty()
                                    ? ""
                                    : fmt::format(" and acquiring {}'s VM", plan.acquireNode),
                                errnoWords(-*fd))
                  : "the probe's child did not answer";
  } else {
    auto c0 = charge.read(id);
    FdinfoReading f0;
    if (plan.fdinfoAbsent.empty()) f0 = readFdinfo(proc, pid, *fd);
    MemInfoReading m0 = readMemInfo(sys, plan.sysNode);
    auto rc = step('a');
    if (!rc || *rc != 0) {
      r.failed = rc ? fmt::format("allocating {} bytes on {}: {}", bytes, r.node, errnoWords(-*rc))
                    : "the probe's child did not answer";
    } else {
      auto c1 = charge.read(id);
      if (c0 && c1)
        r.charge = static_cast<std::int64_t>(c1->bytes) - static_cast<std::int64_t>(c0->bytes);
      if (plan.fdinfoAbsent.empty()) {
        r.fdinfo = fdinfoDelta(f0, readFdinfo(proc, pid, *fd));
        // amdgpu before its runtime-stats rework (~6.14) counts only buffers
        // on a VM's lists: a dumb buffer (and, should a kernel not list a
        // per-VM buffer, a GEM_CREATE one) shows there only once mapped into
        // the GPU's VM, which the probe does not do (mapping makes page
        // tables, charged and counted too). Nothing shown is no figure.
        if (plan.realAmdgpu && r.fdinfo.bytes && *r.fdinfo.bytes == 0 && r.charge &&
            *r.charge != 0) {
          r.fdinfo = Figure{std::nullopt, "",
                            "the client's fdinfo did not move: amdgpu before its runtime-stats "
                            "rework (~6.14) shows a buffer only once mapped into the GPU's VM"};
        }
      } else {
        r.fdinfo.absent = plan.fdinfoAbsent;
      }
      r.memInfo = memInfoDelta(m0, readMemInfo(sys, plan.sysNode));
      if (!refusingOff.empty()) {
        r.refusalNotTried = refusingOff;
      } else if (!c1) {
        r.refusalNotTried = "the lease's charge could not be read";
      } else {
        r.boundBytes = c1->bytes + bytes / 2;
        if (auto bound = charge.arm(id, bpf::ArmSpec{r.boundBytes}); !bound) {
          r.failed = fmt::format("setting the bound: {}", bound.error().message);
        } else {
          if (ownPrograms) (void)charge.refusals();  // only this try's are read after
          auto before = charge.read(id);
          r.tryRc = step('a');
          auto after = charge.read(id);
          if (!r.tryRc) {
            r.failed = "the probe's child did not answer";
          } else if (before && after) {
            r.chargeAtBound = before->bytes;
            r.chargeAfterTry = after->bytes;
            r.refusedDelta = after->refused - before->refused;
            r.failsafeDelta = after->refusedFailsafe - before->refusedFailsafe;
            if (r.failsafeDelta > 0 && ownPrograms)
              for (const auto& f : charge.refusals())
                if (f.lease == id) r.failsafeReason = bpf::reasonName(f.reason);
          }
        }
      }
    }
  }
  send('x');
  out.reset();
  reap(pid, o.stepTimeoutMs);
}

// Removes a pin directory this process made (its pins are files).
void removePinDir(const std::string& dir) {
  if (int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    std::vector<std::string> names;
    fs::forEachEntry(dfd, [&](std::string_view name, unsigned char) {
      names.emplace_back(name);
      return true;
    });
    for (const auto& n : names) ::unlinkat(dfd, n.c_str(), 0);
    ::close(dfd);
  }
  ::rmdir(dir.c_str());
}

}  // namespace

ChargeProbeResult runChargeProbe(const fs::Root& proc, const fs::Root& sys,
                                 const fs::Root& cgroupRoot, const devices::DeviceMap& devices,
                                 const bpf::HostFacts& facts, const bpf::Verdict& verdict,
                                 const ChargeProbeOptions& o) {
  ChargeProbeResult r;
  // Whole pages (a dumb buffer's rows are a page each).
  r.bytes = (o.bytes + kPage - 1) & ~(kPage - 1);
  const bool pinned = sys.exists(o.daemonPins + "/link_charge");
  if (!pinned && !verdict.can.charging) {
    r.outcome = ChargeProbeOutcome::Unavailable;
    r.detail = bpf::describe(verdict);
    return r;
  }
  auto rules = bpf::discoverDeviceRules(sys);
  std::vector<Plan> plans = planPaths(sys, devices, rules, o);
  for (const auto& p : plans) r.paths.push_back(p.result);
  if (std::none_of(plans.begin(), plans.end(), [](const Plan& p) { return p.result.present; })) {
    r.outcome = ChargeProbeOutcome::Ran;
    r.detail = "this host has no allocation path the kernel bound decodes";
    return r;
  }

  // Whose programs: the daemon's, attached now, else this probe's own.
  std::unique_ptr<bpf::KernelCharge> charge;
  std::string ownPins;
  std::string refusingOff;
  if (pinned) {
    auto opened = bpf::openPinnedKernelCharge(sys.describe(o.daemonPins));
    if (!opened) {
      r.outcome = ChargeProbeOutcome::Unavailable;
      r.detail = fmt::format(
          "the daemon's programs are attached ({}), but their maps cannot be "
          "opened: {}",
          sys.describe(o.daemonPins), opened.error().message);
      return r;
    }
    charge = std::move(*opened);
    r.source =
        fmt::format("the daemon's, attached now (pinned under {})", sys.describe(o.daemonPins));
    if (!charge->capabilities().refusing)
      refusingOff = "the attached programs do not refuse (" +
                    (verdict.why.empty() ? std::string("see the daemon's journal") : verdict.why) +
                    ")";
  } else {
    bpf::LoadOptions lo;
    ownPins = sys.describe(fmt::format("fs/bpf/tally-doctor-{}", ::getpid()));
    lo.pinDir = ownPins;
    lo.refuse = verdict.can.refusing;
    lo.devices = rules;
    auto loaded = bpf::loadKernelCharge(lo);
    if (!loaded) {
      removePinDir(ownPins);
      bpf::HostFacts f = facts;
      f.loadError = loaded.error().message;
      r.outcome = ChargeProbeOutcome::Unavailable;
      r.detail = bpf::describe(bpf::assess(f));
      return r;
    }
    charge = std::move(*loaded);
    r.source = fmt::format("loaded for this probe (pinned under {}, removed after)", ownPins);
    if (!verdict.can.refusing) refusingOff = verdict.why;  // "refusing off: ..."
  }
  r.refusing = refusingOff.empty();
  auto unload = [&] {
    charge.reset();
    if (!ownPins.empty()) removePinDir(ownPins);
  };

  // The throw-away cgroup, armed as a lease.
  std::string parent = o.cgroupParent;
  while (parent.size() > 1 && parent.back() == '/') parent.pop_back();
  if (parent.empty() || parent[0] != '/') {
    r.detail = fmt::format("--probe-cgroup '{}' must be an absolute cgroup path", o.cgroupParent);
    unload();
    return r;
  }
  r.cgroup = (parent == "/" ? "" : parent) + fmt::format("/tally-charge-probe-{}", ::getpid());
  const std::string rel = r.cgroup.substr(1);
  if (::mkdirat(cgroupRoot.fd(), rel.c_str(), 0755) != 0) {
    r.detail = fmt::format("mkdir {}: {}", cgroupRoot.describe(rel), std::strerror(errno));
    unload();
    return r;
  }
  struct stat st {};
  auto probeCg = cgroup::Cgroup::open(cgroupRoot, r.cgroup);
  std::string armError;
  auto armed = [&](std::uint64_t id) {
    auto s = charge->arm(id, bpf::ArmSpec{2 * r.bytes});
    if (!s) armError = fmt::format("arming {} (cgroup {}): {}", r.cgroup, id, s.error().message);
    return s.ok();
  };
  if (::fstatat(cgroupRoot.fd(), rel.c_str(), &st, 0) != 0 || !probeCg) {
    r.detail = fmt::format("opening {}: {}", cgroupRoot.describe(rel),
                           probeCg ? std::strerror(errno) : probeCg.error().message);
  } else if (r.cgroupId = st.st_ino; !armed(r.cgroupId)) {
    r.detail = armError;
  } else {
    r.outcome = ChargeProbeOutcome::Ran;
    const std::uint64_t baseline = chargeBytes(*charge, r.cgroupId);
    r.paths.clear();
    for (auto& plan : plans) {
      if (plan.result.present) {
        plan.result.requestedBytes = r.bytes;
        if (!settle(*charge, r.cgroupId, baseline, o.settleMs))
          plan.result.failed = fmt::format(
              "the buffers of the path before were not freed within {} ms (charge {} over {})",
              o.settleMs, chargeBytes(*charge, r.cgroupId), baseline);
        else
          probePath(plan, proc, sys, *probeCg, *charge, r.cgroupId, !pinned, refusingOff, o,
                    r.bytes);
      }
      r.paths.push_back(plan.result);
    }
    (void)settle(*charge, r.cgroupId, baseline, o.settleMs);
    charge->retire(r.cgroupId);
  }
  // The cgroup empties asynchronously after the children are reaped.
  for (int i = 0;
       i < 100 && ::unlinkat(cgroupRoot.fd(), rel.c_str(), AT_REMOVEDIR) != 0 && errno == EBUSY;
       ++i)
    ::usleep(10'000);
  unload();
  return r;
}

}  // namespace tally::coverage
