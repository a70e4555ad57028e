#include "coverage/charge_probe.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "bpf/host.h"
#include "bpf/kernel_charge_bpf.h"
#include "cgroup/cgroup.h"
#include "coverage/charge_probe_child.h"
#include "coverage/charge_probe_plan.h"
#include "coverage/charge_probe_readings.h"
#include "coverage/errno_words.h"
#include "util/unique_fd.h"

namespace tally::coverage {
namespace {

using charge_probe::await;
using charge_probe::child;
using charge_probe::fdinfoDelta;
using charge_probe::FdinfoReading;
using charge_probe::kPage;
using charge_probe::memInfoDelta;
using charge_probe::MemInfoReading;
using charge_probe::Plan;
using charge_probe::planPaths;
using charge_probe::readFdinfo;
using charge_probe::readMemInfo;
using charge_probe::reap;

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
    r.detail = "this host has no allocation path the kernel charge decodes";
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
