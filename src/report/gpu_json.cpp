// `tally gpu --json`: the JSON document (schema 1) of a scan and its aggregate.
#include "report/gpu_json.h"

#include "devices/driver_catalogue.h"
#include "report/device_memory.h"
#include "util/text.h"

namespace tally::report {

using namespace gpumem;
namespace {

using json = nlohmann::ordered_json;

json regionsJson(const RegionMap& regions, bool withShared) {
  json out = json::object();
  for (const auto& [name, s] : regions) {
    json r = json::object();
    if (auto v = s.resident.get()) r["resident_bytes"] = *v;
    if (auto v = s.total.get()) r["total_bytes"] = *v;
    if (withShared)
      if (auto v = s.shared.get()) r["shared_bytes"] = *v;
    r["class"] = devices::memoryClassName(s.cls);
    out[name] = r;
  }
  return out;
}

// GPU memory by the lease meter's rule (gpumem/gpu_memory.h): device and
// host-uncharged regions, shared buffers once; absent with the reason.
void putCounted(json& j, const GpuMemory& g) {
  if (g.bytes) {
    j["counted_bytes"] = *g.bytes;
    j["counted_source"] = g.source;
    if (g.hostMixed)
      j["counted_host_mixed_bytes"] = g.hostMixed;  // flagged: may be in memory.current too
    if (g.kfdAbove) j["counted_kfd_above_fdinfo_bytes"] = g.kfdAbove;
  } else {
    j["counted_bytes"] = nullptr;
    j["counted_unknown"] = g.unknown.value_or("unknown");
  }
}

// KFD's figure, labelled: what it counts and, per device, where it lives.
json kfdJson(const std::optional<KfdFigure>& f, const std::vector<json>& gpus) {
  json j = {{"vram_flagged_bytes", f ? f->bytes : 0}, {"source", "kfd-sysfs"}};
  if (!gpus.empty()) j["gpus"] = gpus;
  if (f && f->inGttBytes) j["in_gtt_bytes"] = f->inGttBytes;
  j["counts"] = f && f->inGttBytes == f->bytes && f->bytes
                    ? "VRAM-flagged KFD allocations, every context; on this APU ROCm places them "
                      "in GTT, so fdinfo's gtt shows the same bytes: a floor on the counted "
                      "figure, never added to it"
                    : "VRAM-flagged KFD allocations, every context, whatever domain they land "
                      "in: a floor on the counted figure, never added to it";
  return j;
}

json workloadJson(const std::optional<attribution::Workload>& w) {
  if (!w) return nullptr;
  json out = {{"kind", attribution::toString(w->kind)}, {"id", w->id}, {"name", w->name}};
  if (w->container) out["container_id"] = *w->container;
  if (w->step) out["step"] = *w->step;
  return out;
}

json clientJson(const scanner::Scan& scan, const Aggregate& agg, std::size_t i, pid_t viewer) {
  const auto& c = scan.clients[i];
  json j;
  if (c.info.pdev)
    j["pdev"] = *c.info.pdev;
  else
    j["pdev"] = nullptr;
  j["major"] = c.major;
  j["minor"] = c.minor;
  if (c.info.clientId)
    j["client_id"] = *c.info.clientId;
  else
    j["client_id"] = nullptr;
  if (!c.info.driver.empty()) j["driver"] = c.info.driver;
  if (c.info.clientName) j["client_name"] = *c.info.clientName;
  j["owner"] = c.owner == viewer;
  j["owner_pid"] = c.owner;
  json holders = json::array();
  for (const auto& h : c.holders) holders.push_back({{"pid", h.pid}, {"fd", h.fd}});
  j["holders"] = holders;
  if (c.sharedAcrossProcesses) j["shared_across_processes"] = true;
  if (c.sharedAcrossCgroups) j["shared_across_cgroups"] = true;
  if (c.undeduplicated) j["deduplication"] = "none: no drm-client-id, counted once per fd";
  json regions = regionsJson(agg.clientRegions[i].regions, true);
  if (agg.clientRegions[i].noFigures()) j["memory_figures"] = "none: the driver prints none";
  for (const auto& [name, r] : c.info.regions) {
    if (auto res = probes::residentOf(r))
      regions[name]["resident_source"] = probes::toString(res->source);
    if (r.purgeable) regions[name]["purgeable_bytes"] = *r.purgeable;
    if (r.active) regions[name]["active_bytes"] = *r.active;
  }
  j["regions"] = regions;
  putCounted(j, agg.clientCounted[i]);
  json engines = json::object();
  for (const auto& [name, e] : c.info.engines) {
    json ej = json::object();
    if (e.busyNs) ej["busy_ns"] = *e.busyNs;
    if (e.cycles) ej["cycles"] = *e.cycles;
    if (e.totalCycles) ej["total_cycles"] = *e.totalCycles;
    if (e.maxfreqHz) ej["maxfreq_hz"] = *e.maxfreqHz;
    if (e.capacity) ej["capacity"] = *e.capacity;
    engines[name] = ej;
  }
  if (!engines.empty()) j["engines"] = engines;
  j["source"] = "drm-fdinfo";
  if (!c.info.rejected.empty()) {
    json rej = json::array();
    for (const auto& r : c.info.rejected) rej.push_back({{"line", r.line}, {"reason", r.reason}});
    j["rejected_lines"] = rej;
  }
  return j;
}

json processKfdJson(const scanner::Process& p, const std::optional<KfdFigure>& f,
                    const Aggregate& agg) {
  std::vector<json> gpus;
  for (const auto& k : p.kfdVram) {
    json g = {{"gpu_id", k.gpuId}, {"vram_flagged_bytes", k.bytes}};
    if (k.context) g["context"] = *k.context;
    if (k.pdev) {
      g["pdev"] = *k.pdev;
      for (const auto& d : agg.devices)
        if (d.device->key == *k.pdev) g["placed_in"] = rocmWhereName(d.rocm.where);
    }
    gpus.push_back(g);
  }
  return kfdJson(f, gpus);
}

}  // namespace

json gpuJson(const scanner::Scan& scan, const Aggregate& agg, const host::Snapshot& host) {
  json doc;
  doc["schema"] = 1;
  doc["observed_at_ns"] = scan.observedAtNs;
  if (scan.scopeCgroup)
    doc["scope"] = {{"kind", "cgroup"}, {"path", *scan.scopeCgroup}};
  else
    doc["scope"] = {{"kind", "host"}};
  // Every client of the scope once: for a cgroup scope, the figure a lease
  // on that cgroup is metered at.
  putCounted(doc["scope"], agg.scopeCounted);
  if (scan.devices.devices.empty()) {
    doc["status"] = "no-drm-devices";
    doc["status_reason"] = "no DRM device (card*/renderD*) under <sys>/class/drm";
  } else {
    doc["status"] = "ok";
  }

  json hostJ = json::object();
  if (host.meminfo.memAvailable)
    hostJ["mem_available_bytes"] = *host.meminfo.memAvailable;
  else
    hostJ["mem_available_unknown"] = host.meminfoError.value_or("no MemAvailable in meminfo");
  hostJ["page_size_bytes"] = host.pageSize;
  if (host.meminfo.memTotal) hostJ["mem_total_bytes"] = *host.meminfo.memTotal;
  if (host.kernel)
    hostJ["kernel_release"] = host.kernel->text;
  else
    hostJ["kernel_release_unknown"] = host.kernelError.value_or("unknown");
  hostJ["kfd_limits_era"] = host.kfdLimits.era;
  // GPUActive (7.1+): the kernel's own count of every TTM page the host's
  // GPUs hold, a second figure beside the clients' fdinfo. What no client
  // shows is kernel buffers, or processes this scan could not read.
  if (host.meminfo.gpuActive) {
    hostJ["gpu_active_bytes"] = *host.meminfo.gpuActive;
    if (host.meminfo.gpuReclaim) hostJ["gpu_reclaim_bytes"] = *host.meminfo.gpuReclaim;
    hostJ["gpu_active_source"] = "/proc/meminfo GPUActive (Linux 7.1+, global)";
    if (!scan.scopeCgroup) {
      std::uint64_t clients = agg.scopeCounted.hostUncharged;
      hostJ["clients_host_uncharged_bytes"] = clients;
      hostJ["gpu_active_outside_clients_bytes"] =
          static_cast<std::int64_t>(*host.meminfo.gpuActive) - static_cast<std::int64_t>(clients);
      if (!scan.unreadable.empty())
        hostJ["gpu_active_outside_clients_note"] =
            "includes the GPU memory of processes whose fds could not be read";
    }
  }
  json ttm = json::array();
  for (const auto& m : host.ttm.loaded) {
    json t = {{"module", m.name}};
    if (m.pagesLimit) {
      t["pages_limit_pages"] = *m.pagesLimit;
      if (auto b = text::mulU64(*m.pagesLimit, host.pageSize)) t["pages_limit_bytes"] = *b;
    } else {
      t["pages_limit_unknown"] = m.pagesLimitUnknown.value_or("unreadable");
    }
    t["holders"] = m.holders;
    if (m.ttmMemcg) t["ttm_memcg"] = *m.ttmMemcg;
    ttm.push_back(t);
  }
  hostJ["ttm_modules"] = ttm;
  if (host.amdgpu.gttsizeMib) hostJ["amdgpu_gttsize_mib"] = *host.amdgpu.gttsizeMib;
  if (host.amdgpu.gttsizeUnreadable)
    hostJ["amdgpu_gttsize_unreadable"] = *host.amdgpu.gttsizeUnreadable;
  if (host.amdgpu.noSystemMemLimit)
    hostJ["amdgpu_no_system_mem_limit"] = *host.amdgpu.noSystemMemLimit;
  json warnings = json::array();
  if (auto w = devices::gttAdvice(host.amdgpu, host.ttm, host.kfdLimits, host.pageSize))
    warnings.push_back(*w);
  hostJ["warnings"] = warnings;
  doc["host"] = hostJ;

  json devs = json::array();
  for (const auto& s : agg.devices) {
    const auto& d = *s.device;
    json j;
    if (d.pdev)
      j["pdev"] = *d.pdev;
    else
      j["pdev"] = nullptr;
    j["key"] = d.key;
    j["driver"] = d.driver.empty() ? json(nullptr) : json(d.driver);
    json minors = json::array(), nodes = json::array();
    for (const auto& n : d.nodes) {
      minors.push_back(n.minor);
      nodes.push_back(n.name);
    }
    j["minors"] = minors;
    j["nodes"] = nodes;
    j["memory"] = deviceMemoryJson(d);
    j["clients"] = s.clients;
    j["attributed"] = regionsJson(s.attributed, false);
    j["attributed_source"] = "drm-fdinfo";
    json un = json::object();
    for (const auto& [region, v] : s.unattributed) un[region] = {{"resident_bytes", v}};
    j["unattributed"] = un;
    if (s.unattributedNote) j["unattributed_note"] = *s.unattributedNote;
    j["gtt_ceiling"] = gttCeilingsJson(s.gttCeilings);
    if (devices::servedByKfd(d.driver)) j["rocm_device_memory"] = rocmPlacementJson(s.rocm);
    if (s.silent)
      j["memory_figures"] =
          "none: this driver prints no memory figure in fdinfo; its clients' GPU memory is "
          "unknown and no gpu_memory_max can be checked on it";
    if (s.gttHeadroomBytes) {
      j["gtt_headroom_bytes"] = *s.gttHeadroomBytes;
      j["gtt_headroom_ceiling"] = s.gttHeadroomCeiling;
    } else {
      j["gtt_headroom_unknown"] = s.gttHeadroomUnknown.value_or("unknown");
    }
    devs.push_back(j);
  }
  doc["devices"] = devs;

  json procs = json::array();
  for (std::size_t i = 0; i < scan.processes.size(); ++i) {
    const auto& p = scan.processes[i];
    json j;
    j["pid"] = p.pid;
    j["nspid"] = p.nspid;
    j["start_time_ticks"] = p.startTimeTicks;
    j["comm"] = p.comm ? json(*p.comm) : json(nullptr);
    if (p.uid) j["uid"] = *p.uid;
    j["cgroup"] = p.cgroup ? json(*p.cgroup) : json(nullptr);
    if (p.cgroupUnknownReason) j["cgroup_unknown_reason"] = *p.cgroupUnknownReason;
    if (p.cgroupDeleted) j["cgroup_deleted"] = true;
    if (p.cgroupOutsideNamespace) j["cgroup_outside_namespace"] = true;
    j["container"] = workloadJson(agg.processWorkloads[i]);
    json clients = json::array();
    for (auto ci : p.clients) clients.push_back(clientJson(scan, agg, ci, p.pid));
    j["clients"] = clients;
    j["regions"] = regionsJson(agg.processRegions[i], false);
    j["regions_source"] = "drm-fdinfo";
    putCounted(j, agg.processCounted[i]);
    j["holds_kfd"] = p.holdsKfd;
    if (!p.kfdVram.empty()) j["kfd"] = processKfdJson(p, agg.processKfd[i], agg);
    procs.push_back(j);
  }
  doc["processes"] = procs;

  json cgs = json::array();
  for (const auto& g : agg.cgroups) {
    json j = {{"path", g.path}, {"container", workloadJson(g.workload)}, {"pids", g.pids}};
    j["regions"] = regionsJson(g.regions, false);
    j["regions_source"] = "drm-fdinfo";
    putCounted(j, g.counted);
    j["clients"] = g.ownedClients.size();
    if (g.kfd) j["kfd"] = kfdJson(g.kfd, {});
    cgs.push_back(j);
  }
  doc["cgroups"] = cgs;

  json ctrs = json::array();
  for (const auto& c : agg.containers) {
    json j = {{"name", c.name},
              {"container", workloadJson(c.workload)},
              {"cgroups", c.cgroups},
              {"pids", c.pids}};
    j["regions"] = regionsJson(c.regions, false);
    j["regions_source"] = "drm-fdinfo";
    putCounted(j, c.counted);
    j["clients"] = c.clients;
    if (c.kfd) j["kfd"] = kfdJson(c.kfd, {});
    ctrs.push_back(j);
  }
  doc["containers"] = ctrs;

  json un = json::array();
  for (const auto& u : scan.unreadable) un.push_back({{"pid", u.pid}, {"reason", u.reason}});
  doc["unreadable"] = un;
  return doc;
}

}  // namespace tally::report
