// The doctor's report as JSON (schema 2) and as text: formatting only.
#include <fmt/format.h>

#include <functional>

#include "cgroup/cgroup.h"
#include "devices/driver_catalogue.h"
#include "doctor/report.h"
#include "report/device_memory.h"
#include "util/text.h"
#include "util/units.h"

namespace tally::doctor {
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

std::string yesNo(std::optional<bool> v) { return !v ? "unknown" : *v ? "yes" : "no"; }

json kernelChargeJson(const KernelCharge& kc) {
  json j = {
      {"charging", kc.verdict.can.charging},
      {"refusing", kc.verdict.can.refusing},
      {"why", kc.verdict.why.empty() ? json(nullptr) : json(kc.verdict.why)},
      {"lsm", kc.facts.lsmList ? json(std::string(text::trim(*kc.facts.lsmList))) : json(nullptr)},
      {"btf", kc.facts.btf},
      {"attached_now", kc.pinned}};
  if (kc.devicesRead) {
    json devs = json::array();
    for (const auto& d : kc.devices)
      devs.push_back({{"device", d.device},
                      {"driver", d.driver},
                      {"nodes", d.nodes},
                      {"registered", d.registered ? json(*d.registered) : json(nullptr)},
                      {"coverage", d.coverage},
                      {"says", d.says}});
    j["devices"] = devs;
  }
  if (kc.pinsUnread) j["attached_maps_unread"] = *kc.pinsUnread;
  if (kc.totals) {
    const auto& t = *kc.totals;
    json c;
    if (t.recursionMisses)
      c["recursion_misses"] = *t.recursionMisses;
    else
      c["recursion_misses_absent"] = "the tracing programs' info could not be read";
    c["stale_objects"] = t.staleObjects;
    c["unseen_objects"] = t.unseenObjects;
    c["stale_reservations"] = t.staleReservations;
    c["insert_failed"] = t.insertFailed;
    c["untracked_full"] = t.untrackedFull;
    c["orphan_uncharges"] = t.orphanUncharges;
    c["events_dropped"] = t.eventsDropped;
    c["contended"] = t.contended;
    j["counters"] = c;
    json says = json::array();
    for (const auto& l : counterLines(t))
      says.push_back({{"counter", l.name}, {"value", l.value}, {"says", l.says}});
    j["counters_said"] = says;
    j["room"] = {{"objects", t.objects},
                 {"objects_capacity", t.objectsCapacity},
                 {"objects_per_lease", t.objectsPerLease},
                 {"leases_capacity", t.leasesCapacity}};
    if (auto w = roomWarning(t)) j["room_warning"] = *w;
  }
  if (kc.shown()) j["not_seen"] = kKernelBoundDoesNotSee;
  j["probe"] = kc.probe ? coverage::chargeProbeJson(*kc.probe) : json(nullptr);
  if (kc.required) j["required"] = true;
  return j;
}

void kernelChargeText(const KernelCharge& kc, const std::function<void(const std::string&)>& line) {
  constexpr const char* indent = "             ";
  line(fmt::format("kernel charge {}", bpf::describe(kc.verdict)));
  line(
      fmt::format("{}attached now: {} (the daemon's programs pinned under /sys/fs/bpf/tally; "
                  "capabilities judged as this process has them)",
                  indent, kc.pinned ? "yes" : "no"));
  if (kc.pinsUnread)
    line(
        fmt::format("{}what the attached programs registered and counted is unread ({}): run "
                    "doctor as root",
                    indent, *kc.pinsUnread));
  for (const auto& d : kc.devices)
    line(fmt::format("{}device {} ({}{}): {}{}", indent, d.device, d.driver,
                     d.nodes.empty() ? "" : fmt::format("; {}", fmt::join(d.nodes, ", ")),
                     kc.pinned ? "" : "when attached, ", d.says));
  if (kc.totals) {
    const auto& t = *kc.totals;
    auto counters = counterLines(t);
    if (counters.empty())
      line(
          fmt::format("{}missed: nothing (every count of what the programs could not do exactly "
                      "is 0{})",
                      indent, t.recursionMisses ? "" : "; recursion misses unread"));
    for (const auto& c : counters)
      line(fmt::format("{}{} {}: {}", indent, c.name, c.value, c.says));
    line(fmt::format("{}room: {}", indent, roomWords(t)));
    if (auto w = roomWarning(t)) line(fmt::format("{}{}", indent, *w));
  }
  if (kc.shown()) line(fmt::format("{}{}", indent, kKernelBoundDoesNotSee));

  const char* required =
      kc.required ? " (--require-kernel-charge: a check that could not run)" : "";
  if (!kc.probe) {
    if (kc.shown()) line("charge probe not run (tally doctor --active runs it)");
    return;
  }
  const auto& p = *kc.probe;
  switch (p.outcome) {
    case coverage::ChargeProbeOutcome::Unavailable:
      line(fmt::format("charge probe not run: {}{}", p.detail, required));
      return;
    case coverage::ChargeProbeOutcome::Failed:
      line(fmt::format("charge probe failed: {}", p.detail));
      return;
    case coverage::ChargeProbeOutcome::Ran:
      break;
  }
  if (p.cgroup.empty())
    line(fmt::format("charge probe {}{}", p.detail, required));
  else
    line(fmt::format("charge probe {} bytes per path in {}; programs {}{}", p.bytes, p.cgroup,
                     p.source,
                     kc.required && !p.refusing ? fmt::format("; refusing off{}", required) : ""));
  for (const auto& path : p.paths) {
    std::string where =
        path.present ? fmt::format(" on {} ({})", path.device, path.node) : std::string();
    line(fmt::format("{}{}{}: {}", indent, coverage::chargePathWords(path.path), where,
                     coverage::pathLine(path)));
  }
}

}  // namespace

int exitStatus(Health h) {
  switch (h) {
    case Health::Ok:
      return 0;
    case Health::Degraded:
      return 1;
    case Health::CheckFailed:
      return 2;
  }
  return 2;
}

json renderJson(const Report& r) {
  const auto& layout = r.layout;
  const auto& a = r.assessment;
  json doc;
  doc["schema"] = 2;
  doc["kernel"] = {{"release", layout.kernel}, {"evidence", r.kernelEvidence}};
  json cg;
  cg["root"] = r.cgroupRootPath;
  cg["v2_root"] = layout.v2Root;
  cg["controllers"] = layout.controllers;
  cg["evidence"] = layout.v2RootEvidence;
  cg["cgroup2_mounts"] = layout.v2Mounts;
  cg["memory_v1_mounts"] = layout.memoryV1Mounts;
  cg["memory_controller"] = layout.memoryController();
  // Where leases would live, only where one can be made at all.
  cg["leases_live_under"] = layout.containable() ? json(r.leaseParent) : json(nullptr);
  if (r.memoryChain) {
    cg["memory_chain"] = chainJson(*r.memoryChain);
    cg["memory_delegated"] = r.memoryDelegated;
    if (r.memoryHint) cg["memory_hint"] = *r.memoryHint;
  }
  doc["cgroup"] = cg;

  json sd = {
      {"pid1", layout.pid1}, {"pid1_is_systemd", layout.systemd}, {"evidence", r.systemd.evidence}};
  if (!r.systemd.reachable) {
    sd["reachable"] = nullptr;
    sd["note"] = r.systemd.note.value_or("");
  } else if (*r.systemd.reachable) {
    sd["reachable"] = true;
    sd["manager"] = r.systemd.manager;
    if (r.systemd.version)
      sd["version"] = *r.systemd.version;
    else
      sd["version_unknown"] = r.systemd.versionUnknown.value_or("");
    sd["oom_policy"] = fmt::format(
        "tally declares OOMPolicy=kill on each lease scope and reads {}=1 back before the workload "
        "runs",
        cgroup::file::kMemoryOomGroup);
  } else {
    sd["reachable"] = false;
    sd["error"] = r.systemd.error.value_or("");
  }
  doc["systemd"] = sd;

  if (r.host.devicesError) doc["gpu_error"] = *r.host.devicesError;
  json devs = json::array();
  const auto& devmap = r.host.devices;
  for (std::size_t i = 0; i < devmap.devices.size(); ++i) {
    const auto& d = devmap.devices[i];
    json dj = {{"key", d.key},
               {"driver", d.driver},
               {"memory", report::deviceMemoryJson(d)},
               {"gtt_ceiling", report::gttCeilingsJson(r.ceilings[i])}};
    if (devices::servedByKfd(d.driver))
      dj["rocm_device_memory"] = report::rocmPlacementJson(r.host.rocm(d));
    if (std::find(r.silentDevices.begin(), r.silentDevices.end(), d.key) != r.silentDevices.end())
      dj["memory_figures"] = "none: the driver prints no memory figure in fdinfo";
    devs.push_back(dj);
  }
  doc["gpu_devices"] = devs;
  doc["gpu_devices_without_figures"] = r.silentDevices;
  doc["kfd_limits_era"] = r.host.kfdLimits.era;
  doc["gtt_warnings"] = r.gttAdvice ? json::array({*r.gttAdvice}) : json::array();
  if (r.host.meminfo.memAvailable) doc["mem_available_bytes"] = *r.host.meminfo.memAvailable;

  json dmem;
  dmem["present"] = r.dmem.present ? json(*r.dmem.present) : json(nullptr);
  dmem["evidence"] = r.dmem.evidence;
  if (r.dmem.chain) {
    dmem["chain"] = chainJson(*r.dmem.chain);
    dmem["reaches_leases"] = r.dmem.chain->enabledAll;
  }
  if (!a.signs.dmem.empty()) {
    json regions = json::array();
    for (const auto& reg : a.signs.dmem)
      regions.push_back(
          {{"name", reg.name}, {"bytes", reg.bytes}, {"kind", coverage::dmemKindName(reg.kind)}});
    dmem["regions"] = regions;
    dmem["what_it_is"] = "a per-cgroup kernel limit tally could set (dmem.max), not memcg charging";
  }
  if (a.signs.gpuActiveBytes) {
    doc["gpu_active_bytes"] = *a.signs.gpuActiveBytes;
    if (a.signs.gpuReclaimBytes) doc["gpu_reclaim_bytes"] = *a.signs.gpuReclaimBytes;
  }
  if (a.signs.dmemCompiledIn) dmem["compiled_in"] = *a.signs.dmemCompiledIn;
  doc["dmem"] = dmem;
  doc["kernel_charge"] = kernelChargeJson(r.kernelCharge);
  json cov;
  cov["static_signs"] = coverage::signsJson(a.signs);
  cov["active_probe"] = a.probe ? json(coverage::probeJson(*a.probe)) : json(nullptr);
  cov["coverage"] = coverage::coverageName(a.verdict.coverage);
  cov["basis"] = a.verdict.basis;
  doc["gtt_memcg_coverage"] = cov;
  doc["degraded"] = r.degraded;
  doc["verdict"] = a.verdict.line;
  doc["exit_status"] = exitStatus(r.health());
  return doc;
}

std::string renderText(const Report& r) {
  const auto& layout = r.layout;
  const auto& a = r.assessment;
  std::string out;
  auto line = [&](const std::string& s) { out += s + "\n"; };
  line(fmt::format("kernel       {}", layout.kernel.empty() ? "?" : layout.kernel));
  line(fmt::format("cgroup       {} {} ({})", r.cgroupRootPath,
                   layout.v2Root ? "is a cgroup v2 root" : "is not a cgroup v2 root",
                   layout.v2RootEvidence));
  if (layout.v2Root) line(fmt::format("             controllers: {}", layout.controllers));
  if (!layout.v2Mounts.empty())
    line(fmt::format("             cgroup2 mounted at {}", fmt::join(layout.v2Mounts, ", ")));
  line(fmt::format("memory       controller: {}{}", layout.memoryController(),
                   layout.memoryV1Mounts.empty()
                       ? ""
                       : fmt::format(" ({})", fmt::join(layout.memoryV1Mounts, ", "))));
  if (layout.containable())
    line(fmt::format("leases       live under {}", r.leaseParent));
  else
    line(fmt::format("leases       none can be made here ({})", fmt::join(layout.problems, "; ")));
  if (r.memoryChain) {
    for (const auto& l : r.memoryChain->levels)
      line(fmt::format("             memory in {}: available {}, enabled for children {}", l.cgroup,
                       yesNo(l.available), yesNo(l.enabledForChildren)));
    if (r.memoryHint) line(fmt::format("             {}", *r.memoryHint));
  }
  const std::string pid1 = layout.pid1.empty() ? "?" : layout.pid1;
  if (!r.systemd.reachable)
    line(fmt::format("systemd      PID 1 is {}; {}", pid1, r.systemd.note.value_or("")));
  else if (*r.systemd.reachable)
    line(fmt::format("systemd      {} manager reachable, version {}", r.systemd.manager,
                     r.systemd.version.value_or("?")));
  else
    line(fmt::format("systemd      PID 1 is {}; no manager reachable: {}", pid1,
                     r.systemd.error.value_or("")));
  std::string built = !a.signs.dmemCompiledIn ? ""
                      : *a.signs.dmemCompiledIn
                          ? "; the kernel has the dmem controller (/proc/cgroups)"
                          : "; this kernel has no dmem controller (/proc/cgroups)";
  kernelChargeText(r.kernelCharge, line);
  if (!r.dmem.present) {
    line(fmt::format("dmem         unknown ({}){}", r.dmem.evidence, built));
  } else if (!*r.dmem.present) {
    line(fmt::format("dmem         absent ({}){}", r.dmem.evidence, built));
  } else {
    std::vector<std::string> regions;
    for (const auto& reg : a.signs.dmem)
      regions.push_back(fmt::format("{} {} ({})", reg.name, units::humanBytes(reg.bytes),
                                    reg.kind == coverage::DmemKind::Vram  ? "device VRAM"
                                    : reg.kind == coverage::DmemKind::Gtt ? "would bound GTT"
                                                                          : "unknown kind"));
    line(fmt::format("dmem         regions: {}",
                     regions.empty() ? "none" : fmt::format("{}", fmt::join(regions, ", "))));
    if (!regions.empty())
      line("             a per-cgroup limit tally could set (dmem.max), not memcg charging");
    if (r.dmem.chain) {
      for (const auto& l : r.dmem.chain->levels)
        line(fmt::format("             dmem in {}: available {}, enabled for children {}", l.cgroup,
                         yesNo(l.available), yesNo(l.enabledForChildren)));
    }
    line(fmt::format(
        "             dmem reaches leases under {}: {}", r.leaseParent,
        yesNo(r.dmem.chain ? std::optional<bool>(r.dmem.chain->enabledAll) : std::nullopt)));
  }
  const auto& devmap = r.host.devices;
  if (devmap.devices.empty()) line("gpu          no DRM devices");
  for (const auto& d : devmap.devices) {
    std::string mem;
    for (const char* reg : {"gtt", "vram"}) {
      if (const auto* m = d.region(reg)) {
        mem += fmt::format(", {} {} used of {}", reg,
                           m->usedBytes ? units::humanBytes(*m->usedBytes) : "?",
                           m->totalBytes ? units::humanBytes(*m->totalBytes) : "?");
      }
    }
    line(fmt::format("gpu          {} ({}){}", d.key, d.driver.empty() ? "no driver" : d.driver,
                     mem));
  }
  for (std::size_t i = 0; i < devmap.devices.size(); ++i) {
    const auto& c = r.ceilings[i];
    const auto& d = devmap.devices[i];
    auto one = [](const devices::Ceiling& x) {
      return x.bytes ? fmt::format("{} ({})", units::humanBytes(*x.bytes), x.source)
                     : fmt::format("unknown ({})", x.unknown.value_or("?"));
    };
    line(fmt::format("gtt ceiling  {} graphics: {}", d.key, one(c.graphics)));
    if (c.compute.bytes || devices::servedByKfd(d.driver)) {
      line(fmt::format("             {} compute (ROCm): {}", d.key, one(c.compute)));
      for (const auto& cap : report::computeTermLines(c))
        line(fmt::format("               cap: {}", cap));
      auto rocm = r.host.rocm(d);
      line(fmt::format("             {} ROCm device memory (hipMalloc): {} ({})", d.key,
                       report::rocmWhereName(rocm.where), rocm.evidence));
    }
    if (auto choice = c.smallerInWords(); !choice.empty())
      line(fmt::format("             headroom uses {}; TTM: {}", choice, c.ttmHow));
  }
  for (const auto& key : r.silentDevices)
    line(fmt::format(
        "gpu          {}: its driver prints no memory figure in fdinfo: its clients' GPU memory is "
        "unknown, and a lease declaring gpu_memory_max there is refused",
        key));
  if (r.gttAdvice) line(fmt::format("warning      {}", *r.gttAdvice));
  if (r.host.meminfo.memAvailable)
    line(fmt::format("host         MemAvailable {}",
                     units::humanBytes(*r.host.meminfo.memAvailable)));
  for (const auto& s : a.signs.signs) {
    line(fmt::format("sign         {}: {} ({})", s.name,
                     s.present ? (*s.present ? "present" : "absent") : "unknown", s.evidence));
  }
  if (a.probe) {
    const auto& p = *a.probe;
    line(fmt::format("probe        {}: {}", coverage::probeOutcomeName(p.outcome), p.detail));
    if (p.deltaMemoryCurrent && p.deltaDrmTotalGtt) {
      line(fmt::format(
          "             {} {} in {}: memory.current {:+} bytes, {} {:+} bytes{}", p.driver,
          p.device, p.cgroup, *p.deltaMemoryCurrent, p.gttKey, *p.deltaDrmTotalGtt,
          p.deltaGpuActive ? fmt::format(", gpu_active {:+} bytes", *p.deltaGpuActive) : ""));
    }
  } else {
    line("probe        not run (tally doctor --active runs it)");
  }
  line(fmt::format("basis        {}", a.verdict.basis));
  for (const auto& d : r.degraded) line(fmt::format("degraded     {}", d));
  line(a.verdict.line);
  return out;
}

}  // namespace tally::doctor
