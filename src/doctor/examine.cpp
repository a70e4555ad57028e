#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bpf/kernel_charge_bpf.h"
#include "cgroup/cgroup.h"
#include "contain/placement.h"
#include "contain/systemd_lease.h"
#include "devices/memory_class.h"
#include "doctor/report.h"

namespace tally::doctor {

Health Report::health() const {
  if (checkFailed) return Health::CheckFailed;
  return degraded.empty() ? Health::Ok : Health::Degraded;
}

Result<Report> examine(const fs::RootPaths& paths, const Options& o) {
  auto proc = fs::Root::open(paths.proc);
  if (!proc) return Error{proc.error().code, proc.error().message + " (check --proc-root)"};
  auto sys = fs::Root::open(paths.sys);
  if (!sys) return Error{sys.error().code, sys.error().message + " (check --sys-root)"};
  std::optional<fs::Root> cgroupRoot;
  std::string cgroupError;
  if (auto cg = fs::Root::open(paths.cgroup))
    cgroupRoot.emplace(std::move(*cg));
  else
    cgroupError = cg.error().message;
  const fs::Root* cgRoot = cgroupRoot ? &*cgroupRoot : nullptr;

  Report r;
  r.cgroupRootPath = paths.cgroup;
  r.kernelEvidence = proc->describe("sys/kernel/osrelease");
  r.layout = contain::readHostLayout(*proc, cgRoot, cgroupError);
  const auto& layout = r.layout;

  // Where leases will live (contain/placement.h: the same rule tally run follows).
  uid_t uid = ::geteuid();
  auto placement = contain::leasePlacement(layout.systemd, uid, coverage::ownCgroup(*proc));
  r.leaseParent = placement.leaseParent;
  if (cgRoot && layout.v2Root) {
    // systemd enables memory on the slices it makes; what it needs is the
    // controller available at its own root (delegated, for a user manager).
    r.memoryChain = cgroup::controllerChain(*cgRoot, placement.managerRoot, "memory");
    r.memoryDelegated = r.memoryChain->availableAtEnd && r.memoryChain->reachedTarget;
    if (!r.memoryDelegated) {
      r.memoryHint =
          uid == 0 || !layout.systemd
              ? fmt::format("memory is not available in {}; enable it in the parent's {}",
                            placement.managerRoot, cgroup::file::kSubtreeControl)
              : fmt::format(
                    "memory controller not delegated to {}; enable Delegate=memory for "
                    "user@{}.service or run as root",
                    placement.managerRoot, uid);
    }
  }

  r.systemd.evidence = proc->describe("1/comm");
  if (!o.queryManager) {
    r.systemd.note = "not queried: the roots are not this host's /proc and /sys";
  } else if (auto bus = contain::SystemdBus::connect(uid != 0)) {
    r.systemd.reachable = true;
    r.systemd.manager = uid != 0 ? "user" : "system";
    if (auto v = (*bus)->version())
      r.systemd.version = *v;
    else
      r.systemd.versionUnknown = v.error().message;
  } else {
    r.systemd.reachable = false;
    r.systemd.error = bus.error().message;
  }

  if (cgRoot && layout.v2Root) {
    auto rootCg = cgroup::Cgroup::open(*cgRoot, "/");
    auto cap =
        rootCg ? rootCg->read(cgroup::file::kDmemCapacity) : Result<std::string>(rootCg.error());
    r.dmem.present = cap.ok();
    std::string where = cgRoot->describe(cgroup::file::kDmemCapacity);
    if (cap) {
      r.dmem.evidence = where;
      // Nothing enables dmem for tally: it reaches a lease only when every
      // cgroup above it already has +dmem in its subtree_control.
      r.dmem.chain = cgroup::controllerChain(*cgRoot, r.leaseParent, "dmem");
    } else {
      r.dmem.evidence = fmt::format("{}: {}", where, cap.error().message);
    }
  } else {
    // No cgroup2 root here: dmem.capacity cannot exist, so its absence says nothing.
    r.dmem.evidence = fmt::format("{} is not a cgroup v2 root: unknown there", paths.cgroup);
  }

  r.host = host::readSnapshot(*proc, *sys);
  r.kernelCharge.facts = bpf::readHostFacts(*sys);
  r.kernelCharge.verdict = bpf::assess(r.kernelCharge.facts);
  struct stat pin {};
  r.kernelCharge.pinned = ::fstatat(sys->fd(), "fs/bpf/tally/link_charge", &pin, 0) == 0;
  auto& kc = r.kernelCharge;
  kc.required = o.requireKernelBound;
  // Which devices the bound covers: the rules are read from this host's
  // device nodes (/dev/dri, /dev/kfd), so only on its own roots.
  if (o.queryManager && kc.shown()) {
    std::optional<std::vector<bpf::DeviceRule>> registered;
    bool refusing = kc.verdict.can.refusing;
    if (kc.pinned) {
      if (auto pins = bpf::openPinnedKernelCharge(sys->describe("fs/bpf/tally"))) {
        registered = (*pins)->devices();
        kc.totals = (*pins)->totals();
        refusing = (*pins)->capabilities().refusing;
      } else {
        kc.pinsUnread = pins.error().message;
      }
    }
    kc.devices = judgeDevices(r.host.devices, bpf::discoverDeviceRules(*sys), registered, refusing);
    kc.devicesRead = true;
  }
  if (r.host.devicesError) r.checkFailed = true;
  for (const auto& d : r.host.devices.devices) {
    r.ceilings.push_back(r.host.ceilings(d));
    if (devices::driverFigures(d.driver) == devices::DriverFigures::None)
      r.silentDevices.push_back(d.key);
  }
  r.gttAdvice = devices::gttAdvice(r.host.amdgpu, r.host.ttm, r.host.kfdLimits, r.host.pageSize);

  r.assessment = coverage::assess(*proc, *sys, cgRoot, r.host.devices, layout.kernel,
                                  coverage::ownCgroup(*proc), o.probe);
  if (r.assessment.probe && r.assessment.probe->outcome == coverage::ProbeOutcome::Failed)
    r.checkFailed = true;

  r.degraded = layout.problems;
  if (layout.containable() && cgRoot && layout.v2Root && !r.memoryDelegated)
    r.degraded.push_back(r.memoryHint.value_or("memory not delegated"));

  // The kernel charge's probe (kernel_bound.h: what it does to the exit status).
  if (o.chargeProbe) {
    if (cgRoot) {
      kc.probe = coverage::runChargeProbe(*proc, *sys, *cgRoot, r.host.devices, kc.facts,
                                          kc.verdict, *o.chargeProbe);
    } else {
      kc.probe = coverage::ChargeProbeResult{};
      kc.probe->detail = "no cgroup v2 root to make the probe's cgroup in";
    }
    auto health = judgeChargeProbe(*kc.probe, o.requireKernelBound);
    r.degraded.insert(r.degraded.end(), health.degraded.begin(), health.degraded.end());
    if (health.checkFailed) r.checkFailed = true;
  }
  return r;
}

}  // namespace tally::doctor
