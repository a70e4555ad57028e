// `tally doctor`: what this host offers a lease, each section with the
// evidence it read -- cgroup v2 and where leases live, systemd, dmem, the GPU
// devices and the GTT ceiling, and GTT -> memcg coverage (static signs, and
// with --active the probe). The last line is the coverage verdict.
#include "cli/cmd_doctor.h"

#include <fmt/format.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "cgroup/cgroup.h"
#include "cgroup/chain.h"
#include "cli/exit_codes.h"
#include "cli/roots.h"
#include "contain/host_layout.h"
#include "contain/placement.h"
#include "contain/systemd_lease.h"
#include "coverage/assess.h"
#include "devices/drm_devices.h"
#include "devices/memory_class.h"
#include "host/snapshot.h"
#include "report/gpu_report.h"
#include "util/text.h"
#include "util/units.h"

namespace tally::cli {
namespace {

using json = nlohmann::ordered_json;

json chainJson(const cgroup::Chain& c) {
  json levels = json::array();
  for (const auto& l : c.levels) {
    levels.push_back({{"cgroup", l.cgroup},
                      {"available", l.available},
                      {"enabled_for_children",
                       l.enabledForChildren ? json(*l.enabledForChildren) : json(nullptr)},
                      {"evidence", l.evidence}});
  }
  return levels;
}

bool liveRoots(const fs::RootPaths& p) { return p.proc == "/proc" && p.sys == "/sys"; }

}  // namespace

void addDoctorCommand(CLI::App& app, DoctorOptions& opts) {
  auto* doctor = app.add_subcommand(
      "doctor", "What this host offers a lease, and whether MemoryMax covers GTT here");
  doctor->footer(
      "Sections, each with the evidence read: cgroup v2 (controllers, where leases live, memory\n"
      "delegation), systemd (reachable, version), dmem (regions, delegation), GPU devices "
      "(GTT/VRAM,\n"
      "GTT ceiling), and GTT -> memcg coverage: static signs (memory.stat gpu_active, ttm_memcg,\n"
      "a dmem GTT region, GPUActive) and, with --active, a probe that allocates a GTT buffer in a\n"
      "throw-away cgroup and compares memory.current with the client's drm-total-gtt (root only).\n"
      "The last line is the verdict: what a lease's MemoryMax covers on this kernel.\n\n"
      "Exit status (a health check: docs/doctor.md): 0 leases can be contained and metered "
      "here,\n"
      "whoever bounds GTT (the kernel, or tally from DRM fdinfo: today's normal AMD state); 1\n"
      "degraded (leases cannot be contained: no cgroup v2 memory controller, memory not "
      "delegated\n"
      "where they live, no systemd and no delegated subtree); 2 a check could not run (the "
      "probe\n"
      "failed, /proc or /sys unreadable) or a usage error. The coverage verdict is reported, "
      "never\n"
      "an error.");
  doctor->add_flag("--json", opts.json, "print the report as JSON");
  doctor->add_flag("--active", opts.active,
                   "run the active GTT -> memcg probe (root; allocates --probe-size of GTT)");
  doctor->add_option("--probe-size", opts.probeSize, "GTT buffer the probe allocates")
      ->default_str("64MiB");
  doctor
      ->add_option("--probe-cgroup", opts.probeCgroup,
                   "parent of the probe's throw-away cgroup (needs +memory in its subtree_control)")
      ->default_str("/");
}

int runDoctor(const fs::RootPaths& paths, const DoctorOptions& opts) {
  auto roots = openRoots(paths);
  if (!roots) return kExitCheckFailed;
  const fs::Root* cgRoot = roots->cgroup ? &*roots->cgroup : nullptr;
  bool errors = false;
  json doc;
  doc["schema"] = 2;

  auto layout = contain::readHostLayout(roots->proc, cgRoot, roots->cgroupError.value_or(""));
  doc["kernel"] = {{"release", layout.kernel},
                   {"evidence", roots->proc.describe("sys/kernel/osrelease")}};

  // Where leases will live (contain/placement.h: the same rule tally run follows).
  uid_t uid = ::geteuid();
  auto placement = contain::leasePlacement(layout.systemd, uid, coverage::ownCgroup(roots->proc));
  const std::string& managerRoot = placement.managerRoot;
  const std::string& leaseParent = placement.leaseParent;
  json cg;
  cg["root"] = paths.cgroup;
  cg["v2_root"] = layout.v2Root;
  cg["controllers"] = layout.controllers;
  cg["evidence"] = layout.v2RootEvidence;
  cg["cgroup2_mounts"] = layout.v2Mounts;
  cg["memory_v1_mounts"] = layout.memoryV1Mounts;
  cg["memory_controller"] = layout.memoryController();
  // Where leases would live, only where one can be made at all.
  if (layout.containable())
    cg["leases_live_under"] = leaseParent;
  else
    cg["leases_live_under"] = nullptr;
  bool memoryDelegated = false;
  if (cgRoot && layout.v2Root) {
    // systemd enables memory on the slices it makes; what it needs is the
    // controller available at its own root (delegated, for a user manager).
    auto chain = cgroup::controllerChain(*cgRoot, managerRoot, "memory");
    memoryDelegated = chain.availableAtEnd && chain.reachedTarget;
    cg["memory_chain"] = chainJson(chain);
    cg["memory_delegated"] = memoryDelegated;
    if (!memoryDelegated) {
      cg["memory_hint"] =
          uid == 0 || !layout.systemd
              ? fmt::format("memory is not available in {}; enable it in the parent's {}",
                            managerRoot, cgroup::file::kSubtreeControl)
              : fmt::format(
                    "memory controller not delegated to {}; enable Delegate=memory for "
                    "user@{}.service or run as root",
                    managerRoot, uid);
    }
  }
  doc["cgroup"] = cg;

  json sd = {{"pid1", layout.pid1},
             {"pid1_is_systemd", layout.systemd},
             {"evidence", roots->proc.describe("1/comm")}};
  if (!liveRoots(paths)) {
    sd["reachable"] = nullptr;
    sd["note"] = "not queried: the roots are not this host's /proc and /sys";
  } else if (auto bus = contain::SystemdBus::connect(uid != 0)) {
    sd["reachable"] = true;
    sd["manager"] = uid != 0 ? "user" : "system";
    if (auto v = (*bus)->version())
      sd["version"] = *v;
    else
      sd["version_unknown"] = v.error().message;
    sd["oom_policy"] = fmt::format(
        "tally declares OOMPolicy=kill on each lease scope and reads {}=1 back before the workload "
        "runs",
        cgroup::file::kMemoryOomGroup);
  } else {
    sd["reachable"] = false;
    sd["error"] = bus.error().message;
  }
  doc["systemd"] = sd;

  json dmem;
  if (cgRoot && layout.v2Root) {
    auto rootCg = cgroup::Cgroup::open(*cgRoot, "/");
    auto cap =
        rootCg ? rootCg->read(cgroup::file::kDmemCapacity) : Result<std::string>(rootCg.error());
    dmem["present"] = cap.ok();
    std::string where = cgRoot->describe(cgroup::file::kDmemCapacity);
    if (cap) {
      dmem["evidence"] = where;
      // Nothing enables dmem for tally: it reaches a lease only when every
      // cgroup above it already has +dmem in its subtree_control.
      auto chain = cgroup::controllerChain(*cgRoot, leaseParent, "dmem");
      dmem["chain"] = chainJson(chain);
      dmem["reaches_leases"] = chain.enabledAll;
    } else {
      dmem["evidence"] = fmt::format("{}: {}", where, cap.error().message);
    }
  } else {
    // No cgroup2 root here: dmem.capacity cannot exist, so its absence says nothing.
    dmem["present"] = nullptr;
    dmem["evidence"] = fmt::format("{} is not a cgroup v2 root: unknown there", paths.cgroup);
  }

  auto host = host::readSnapshot(roots->proc, roots->sys);
  if (host.devicesError) {
    errors = true;
    doc["gpu_error"] = *host.devicesError;
  }
  const devices::DeviceMap& devmap = host.devices;
  std::vector<devices::GttCeilings> ceilings;
  std::vector<std::string> silent;  // devices whose driver prints no memory figure
  json devs = json::array();
  for (const auto& d : devmap.devices) {
    ceilings.push_back(host.ceilings(d));
    json dj = {{"key", d.key},
               {"driver", d.driver},
               {"memory", report::deviceMemoryJson(d)},
               {"gtt_ceiling", report::gttCeilingsJson(ceilings.back())}};
    if (d.driver == "amdgpu") dj["rocm_device_memory"] = report::rocmPlacementJson(host.rocm(d));
    if (devices::driverFigures(d.driver) == devices::DriverFigures::None) {
      dj["memory_figures"] = "none: the driver prints no memory figure in fdinfo";
      silent.push_back(d.key);
    }
    devs.push_back(dj);
  }
  doc["gpu_devices"] = devs;
  doc["gpu_devices_without_figures"] = silent;
  doc["kfd_limits_era"] = host.kfdLimits.era;
  auto gttsizeWarning = devices::gttAdvice(host.amdgpu, host.ttm, host.kfdLimits, host.pageSize);
  doc["gtt_warnings"] = gttsizeWarning ? json::array({*gttsizeWarning}) : json::array();
  if (host.meminfo.memAvailable) doc["mem_available_bytes"] = *host.meminfo.memAvailable;

  std::optional<coverage::ProbeOptions> probe;
  if (opts.active) {
    auto size = units::parseSize(opts.probeSize);
    if (!size || *size < (1ULL << 20) || *size > (1ULL << 32)) {
      fmt::print(stderr, "tally doctor: --probe-size {}: must be 1MiB..4GiB\n", opts.probeSize);
      return kExitUsage;
    }
    probe = coverage::ProbeOptions{};
    probe->bytes = *size;
    probe->cgroupParent = opts.probeCgroup;
  }
  auto a = coverage::assess(roots->proc, roots->sys, cgRoot, devmap, layout.kernel,
                            coverage::ownCgroup(roots->proc), probe);
  if (!a.signs.dmem.empty()) {
    json regions = json::array();
    for (const auto& r : a.signs.dmem)
      regions.push_back(
          {{"name", r.name}, {"bytes", r.bytes}, {"kind", coverage::dmemKindName(r.kind)}});
    dmem["regions"] = regions;
    dmem["what_it_is"] = "a per-cgroup kernel limit tally could set (dmem.max), not memcg charging";
  }
  if (a.signs.gpuActiveBytes) {
    doc["gpu_active_bytes"] = *a.signs.gpuActiveBytes;
    if (a.signs.gpuReclaimBytes) doc["gpu_reclaim_bytes"] = *a.signs.gpuReclaimBytes;
  }
  if (a.signs.dmemCompiledIn) dmem["compiled_in"] = *a.signs.dmemCompiledIn;
  doc["dmem"] = dmem;
  json cov;
  cov["static_signs"] = coverage::signsJson(a.signs);
  if (a.probe) {
    cov["active_probe"] = coverage::probeJson(*a.probe);
    if (a.probe->outcome == coverage::ProbeOutcome::Failed) errors = true;
  } else {
    cov["active_probe"] = nullptr;
  }
  cov["coverage"] = coverage::coverageName(a.verdict.coverage);
  cov["basis"] = a.verdict.basis;
  doc["gtt_memcg_coverage"] = cov;

  std::vector<std::string> degraded = layout.problems;
  if (layout.containable() && cgRoot && layout.v2Root && !memoryDelegated)
    degraded.push_back(cg.value("memory_hint", "memory not delegated"));
  doc["degraded"] = degraded;
  doc["verdict"] = a.verdict.line;
  int rc = errors ? kExitCheckFailed : degraded.empty() ? kExitOk : kExitDegraded;
  doc["exit_status"] = rc;

  if (opts.json) {
    fmt::print("{}\n", doc.dump(2));
    return rc;
  }
  auto yesNo = [](const json& v) {
    return v.is_null()     ? std::string("unknown")
           : v.get<bool>() ? std::string("yes")
                           : std::string("no");
  };
  fmt::print("kernel       {}\n", layout.kernel.empty() ? "?" : layout.kernel);
  fmt::print("cgroup       {} {} ({})\n", paths.cgroup,
             layout.v2Root ? "is a cgroup v2 root" : "is not a cgroup v2 root",
             layout.v2RootEvidence);
  if (layout.v2Root) fmt::print("             controllers: {}\n", layout.controllers);
  if (!layout.v2Mounts.empty())
    fmt::print("             cgroup2 mounted at {}\n", fmt::join(layout.v2Mounts, ", "));
  fmt::print("memory       controller: {}{}\n", layout.memoryController(),
             layout.memoryV1Mounts.empty()
                 ? ""
                 : fmt::format(" ({})", fmt::join(layout.memoryV1Mounts, ", ")));
  if (layout.containable())
    fmt::print("leases       live under {}\n", leaseParent);
  else
    fmt::print("leases       none can be made here ({})\n", fmt::join(layout.problems, "; "));
  if (cg.contains("memory_chain")) {
    for (const auto& l : cg["memory_chain"]) {
      fmt::print("             memory in {}: available {}, enabled for children {}\n",
                 l["cgroup"].get<std::string>(), yesNo(l["available"]),
                 yesNo(l["enabled_for_children"]));
    }
    if (cg.contains("memory_hint"))
      fmt::print("             {}\n", cg["memory_hint"].get<std::string>());
  }
  if (sd["reachable"].is_null())
    fmt::print("systemd      PID 1 is {}; {}\n", layout.pid1.empty() ? "?" : layout.pid1,
               sd["note"].get<std::string>());
  else if (sd["reachable"].get<bool>())
    fmt::print("systemd      {} manager reachable, version {}\n", sd["manager"].get<std::string>(),
               sd.value("version", "?"));
  else
    fmt::print("systemd      PID 1 is {}; no manager reachable: {}\n",
               layout.pid1.empty() ? "?" : layout.pid1, sd["error"].get<std::string>());
  std::string built = !a.signs.dmemCompiledIn ? ""
                      : *a.signs.dmemCompiledIn
                          ? "; the kernel has the dmem controller (/proc/cgroups)"
                          : "; this kernel has no dmem controller (/proc/cgroups)";
  if (dmem["present"].is_null()) {
    fmt::print("dmem         unknown ({}){}\n", dmem["evidence"].get<std::string>(), built);
  } else if (!dmem["present"].get<bool>()) {
    fmt::print("dmem         absent ({}){}\n", dmem["evidence"].get<std::string>(), built);
  } else {
    std::vector<std::string> regions;
    for (const auto& r : a.signs.dmem)
      regions.push_back(fmt::format("{} {} ({})", r.name, units::humanBytes(r.bytes),
                                    r.kind == coverage::DmemKind::Vram  ? "device VRAM"
                                    : r.kind == coverage::DmemKind::Gtt ? "would bound GTT"
                                                                        : "unknown kind"));
    fmt::print("dmem         regions: {}\n",
               regions.empty() ? "none" : fmt::format("{}", fmt::join(regions, ", ")));
    if (!regions.empty())
      fmt::print(
          "             a per-cgroup limit tally could set (dmem.max), not memcg charging\n");
    for (const auto& l : dmem["chain"]) {
      fmt::print("             dmem in {}: available {}, enabled for children {}\n",
                 l["cgroup"].get<std::string>(), yesNo(l["available"]),
                 yesNo(l["enabled_for_children"]));
    }
    fmt::print("             dmem reaches leases under {}: {}\n", leaseParent,
               yesNo(dmem["reaches_leases"]));
  }
  if (devmap.devices.empty()) fmt::print("gpu          no DRM devices\n");
  for (const auto& d : devmap.devices) {
    std::string mem;
    for (const char* r : {"gtt", "vram"}) {
      if (const auto* m = d.region(r)) {
        mem += fmt::format(", {} {} used of {}", r,
                           m->usedBytes ? units::humanBytes(*m->usedBytes) : "?",
                           m->totalBytes ? units::humanBytes(*m->totalBytes) : "?");
      }
    }
    fmt::print("gpu          {} ({}){}\n", d.key, d.driver.empty() ? "no driver" : d.driver, mem);
  }
  for (std::size_t i = 0; i < devmap.devices.size(); ++i) {
    const auto& c = ceilings[i];
    auto one = [](const devices::Ceiling& x) {
      return x.bytes ? fmt::format("{} ({})", units::humanBytes(*x.bytes), x.source)
                     : fmt::format("unknown ({})", x.unknown.value_or("?"));
    };
    fmt::print("gtt ceiling  {} graphics: {}\n", devmap.devices[i].key, one(c.graphics));
    if (c.compute.bytes || devmap.devices[i].driver == "amdgpu") {
      fmt::print("             {} compute (ROCm): {}\n", devmap.devices[i].key, one(c.compute));
      for (const auto& line : report::computeTermLines(c))
        fmt::print("               cap: {}\n", line);
      auto rocm = host.rocm(devmap.devices[i]);
      fmt::print("             {} ROCm device memory (hipMalloc): {} ({})\n", devmap.devices[i].key,
                 report::rocmWhereName(rocm.where), rocm.evidence);
    }
    if (auto choice = c.smallerInWords(); !choice.empty())
      fmt::print("             headroom uses {}; TTM: {}\n", choice, c.ttmHow);
  }
  for (const auto& key : silent)
    fmt::print(
        "gpu          {}: its driver prints no memory figure in fdinfo: its clients' GPU memory is "
        "unknown, and a lease declaring gpu_memory_max there is refused\n",
        key);
  if (gttsizeWarning) fmt::print("warning      {}\n", *gttsizeWarning);
  if (host.meminfo.memAvailable)
    fmt::print("host         MemAvailable {}\n", units::humanBytes(*host.meminfo.memAvailable));
  for (const auto& s : a.signs.signs) {
    fmt::print("sign         {}: {} ({})\n", s.name,
               s.present ? (*s.present ? "present" : "absent") : "unknown", s.evidence);
  }
  if (a.probe) {
    const auto& p = *a.probe;
    fmt::print("probe        {}: {}\n", coverage::probeOutcomeName(p.outcome), p.detail);
    if (p.deltaMemoryCurrent && p.deltaDrmTotalGtt) {
      fmt::print("             {} {} in {}: memory.current +{} bytes, {} +{} bytes{}\n", p.driver,
                 p.device, p.cgroup, *p.deltaMemoryCurrent, p.gttKey, *p.deltaDrmTotalGtt,
                 p.deltaGpuActive ? fmt::format(", gpu_active +{} bytes", *p.deltaGpuActive) : "");
    }
  } else {
    fmt::print("probe        not run (tally doctor --active runs it)\n");
  }
  fmt::print("basis        {}\n", a.verdict.basis);
  for (const auto& d : degraded) fmt::print("degraded     {}\n", d);
  fmt::print("{}\n", a.verdict.line);
  return rc;
}

}  // namespace tally::cli
