#include "coverage/coverage.h"

#include <fmt/format.h>

#include "cgroup/cgroup.h"
#include "probes/cgroup_memory.h"
#include "probes/dmem.h"
#include "probes/meminfo.h"
#include "probes/proc_cgroup.h"
#include "util/json_view.h"
#include "util/text.h"

namespace tally::coverage {

bool StaticSigns::suggestsCharging() const {
  for (const auto& s : signs) {
    if (s.suggestsCharging && s.present.value_or(false)) return true;
  }
  return false;
}

std::vector<std::string> StaticSigns::dmemGttRegions() const {
  std::vector<std::string> out;
  for (const auto& r : dmem)
    if (r.kind == DmemKind::Gtt) out.push_back(r.name);
  return out;
}

DmemKind classifyDmemRegion(std::string_view name) {
  auto slash = name.rfind('/');
  std::string_view last = slash == std::string_view::npos ? name : name.substr(slash + 1);
  if (text::startsWith(last, "vram")) return DmemKind::Vram;
  for (std::string_view word : {"gtt", "system", "sysmem"})
    if (last.find(word) != std::string_view::npos) return DmemKind::Gtt;
  return DmemKind::Unknown;
}

const char* dmemKindName(DmemKind k) {
  switch (k) {
    case DmemKind::Vram:
      return "vram";
    case DmemKind::Gtt:
      return "gtt";
    case DmemKind::Unknown:
      return "unknown";
  }
  return "unknown";
}

namespace {

// The ttm_memcg option of one TTM module: the module-option patch of the
// posted (unmerged) TTM memcg series. Its absence says only that this
// kernel's module lacks the option.
Sign ttmMemcg(const fs::Root& sys, const devices::TtmModule& m) {
  Sign s{m.name + ".ttm_memcg", false, "", true};
  std::string rel = "module/" + m.name + "/parameters/ttm_memcg";
  if (!m.ttmMemcg) {
    s.evidence = fmt::format(
        "{} absent: this kernel's {} has no ttm_memcg option (it comes with the posted TTM memcg "
        "series, not merged)",
        sys.describe(rel), m.name);
    return s;
  }
  s.present = *m.ttmMemcg == "Y" || *m.ttmMemcg == "1";
  s.evidence = fmt::format("{} = {}", sys.describe(rel), *m.ttmMemcg);
  return s;
}

}  // namespace

StaticSigns readStaticSigns(const fs::Root& proc, const fs::Root& sys, const fs::Root* cgroupRoot,
                            const std::string& statCgroup, const devices::TtmModules& ttm) {
  StaticSigns out;
  namespace file = cgroup::file;
  // memory.stat keys: gpu_active (the TTM memcg series) and dmem (the
  // proposed dmem -> memcg route). Either proves the kernel can charge,
  // not that a driver does: only the probe proves that.
  Sign stat{fmt::format("{} gpu_active", file::kMemoryStat), std::nullopt, "", true};
  Sign statDmem{fmt::format("{} dmem", file::kMemoryStat), std::nullopt, "", true};
  std::optional<cgroup::Cgroup> root;
  std::string rootError = "no cgroup v2 root";
  if (cgroupRoot) {
    if (auto r = cgroup::Cgroup::open(*cgroupRoot, "/"); !r) {
      rootError = r.error().message;
    } else if (auto c = r->read(file::kControllers, 4096); !c) {
      // A v1 or tmpfs mount there: no cgroup2 file can exist, so its absence says nothing.
      rootError = fmt::format("{} is not a cgroup v2 root (no {}): unknown there",
                              cgroupRoot->path(), file::kControllers);
    } else {
      root.emplace(std::move(*r));
    }
  }
  if (!root) {
    stat.evidence = statDmem.evidence = rootError;
  } else if (auto cg = cgroup::Cgroup::open(*cgroupRoot, statCgroup.empty() ? "/" : statCgroup);
             !cg) {
    stat.evidence = statDmem.evidence = fmt::format("{}: {}", statCgroup, cg.error().message);
  } else if (auto parsed = cg->memoryStat(); !parsed) {
    stat.evidence = statDmem.evidence =
        fmt::format("{}: {}", cg->describe(file::kMemoryStat), parsed.error().message);
  } else {
    auto where = cg->describe(file::kMemoryStat);
    for (auto [sign, key] : {std::pair{&stat, "gpu_active"}, std::pair{&statDmem, "dmem"}}) {
      auto v = parsed->get(key);
      sign->present = v.has_value();
      if (v) out.statNamesGpu = true;
      sign->evidence = v ? fmt::format(
                               "{} has {} {}: the kernel can charge these pages to memcg (support, "
                               "not proof a driver does)",
                               where, key, *v)
                         : fmt::format("{} has no {} key", where, key);
    }
  }
  out.signs.push_back(stat);
  out.signs.push_back(statDmem);
  for (const auto& m : ttm.loaded) out.signs.push_back(ttmMemcg(sys, m));
  if (ttm.loaded.empty())
    out.signs.push_back({"ttm_memcg", std::nullopt, "no TTM module is loaded", true});

  // dmem.memcg: the root file of the proposed dmem -> memcg route.
  Sign dmemMemcg{std::string(file::kDmemMemcg), std::nullopt, "", true};
  // The dmem regions: kernel limits tally could set, not memcg charging.
  Sign dmem{"dmem regions", std::nullopt, "", false};
  if (!root) {
    dmemMemcg.evidence = dmem.evidence = rootError;
  } else {
    if (auto v = root->read(file::kDmemMemcg)) {
      dmemMemcg.present = true;
      dmemMemcg.evidence = fmt::format("{} reads '{}'", root->describe(file::kDmemMemcg),
                                       text::truncateUtf8(text::trim(*v), 200));
    } else {
      dmemMemcg.present = false;
      dmemMemcg.evidence = fmt::format("{} absent", root->describe(file::kDmemMemcg));
    }
    if (auto cap = root->read(file::kDmemCapacity); !cap) {
      dmem.present = false;
      dmem.evidence =
          fmt::format("{} absent (no dmem controller)", root->describe(file::kDmemCapacity));
    } else if (auto regions = probes::parseDmemCapacity(*cap); !regions) {
      dmem.evidence = fmt::format("{} unparsable", root->describe(file::kDmemCapacity));
    } else {
      std::vector<std::string> shown;
      for (const auto& r : *regions) {
        DmemKind k = classifyDmemRegion(r.name);
        out.dmem.push_back({r.name, r.bytes, k});
        shown.push_back(fmt::format("{} {} ({})", r.name, r.bytes,
                                    k == DmemKind::Vram  ? "device VRAM"
                                    : k == DmemKind::Gtt ? "would bound GTT"
                                                         : "unknown kind"));
      }
      dmem.present = !regions->empty();
      dmem.evidence =
          regions->empty()
              ? fmt::format("{} lists no region", root->describe(file::kDmemCapacity))
              : fmt::format(
                    "{}: {}; a per-cgroup limit tally could set ({}), not "
                    "memcg charging",
                    root->describe(file::kDmemCapacity), fmt::join(shown, ", "), file::kDmemMax);
    }
  }
  out.signs.push_back(dmemMemcg);
  out.signs.push_back(dmem);

  // Whether this kernel has the dmem controller at all (CONFIG_CGROUP_DMEM),
  // whatever is mounted where: /proc/cgroups lists every controller built in.
  Sign built{"dmem controller (/proc/cgroups)", std::nullopt, "", false};
  if (auto text = proc.read("cgroups", 64 * 1024)) {
    built.present = false;
    for (const auto& c : probes::parseProcCgroups(*text))
      if (c.name == "dmem") built.present = true;
    built.evidence = *built.present
                         ? fmt::format("{} lists dmem: the kernel has the dmem controller",
                                       proc.describe("cgroups"))
                         : fmt::format(
                               "{} has no dmem line: this kernel has no dmem controller "
                               "(CONFIG_CGROUP_DMEM unset, or before 6.14)",
                               proc.describe("cgroups"));
  } else {
    built.evidence = fmt::format("{}: {}", proc.describe("cgroups"), text.error().message);
  }
  out.dmemCompiledIn = built.present;
  out.signs.push_back(built);

  // GPUActive is global (v7.1+): the kernel counts GPU pages, not per cgroup.
  Sign meminfo{"/proc/meminfo GPUActive", std::nullopt, "", false};
  if (auto text = proc.read("meminfo", 64 * 1024)) {
    auto mi = probes::parseMemInfo(*text);
    out.gpuActiveBytes = mi.gpuActive;
    out.gpuReclaimBytes = mi.gpuReclaim;
    meminfo.present = mi.gpuActive.has_value();
    meminfo.evidence =
        mi.gpuActive
            ? fmt::format(
                  "GPUActive {} bytes, GPUReclaim {}: every TTM page the host's GPUs hold "
                  "(global, not per cgroup)",
                  *mi.gpuActive, mi.gpuReclaim ? fmt::format("{} bytes", *mi.gpuReclaim) : "absent")
            : "no GPUActive line (kernel before 7.1)";
  } else {
    meminfo.evidence = fmt::format("{}: {}", proc.describe("meminfo"), text.error().message);
  }
  out.signs.push_back(meminfo);
  return out;
}

const char* probeOutcomeName(ProbeOutcome o) {
  switch (o) {
    case ProbeOutcome::Charged:
      return "charged";
    case ProbeOutcome::NotCharged:
      return "not-charged";
    case ProbeOutcome::Inconclusive:
      return "inconclusive";
    case ProbeOutcome::NoProbe:
      return "no-probe";
    case ProbeOutcome::Failed:
      return "failed";
  }
  return "?";
}

ProbeOutcome judgeProbe(std::uint64_t requested, std::int64_t deltaCurrent, std::int64_t deltaGtt,
                        std::string& why) {
  auto req = static_cast<std::int64_t>(requested);
  if (deltaGtt < req - req / 10) {
    why = fmt::format(
        "the client's drm-total-gtt grew by {} bytes for a {} byte buffer: the driver does not "
        "show it",
        deltaGtt, req);
    return ProbeOutcome::Inconclusive;
  }
  if (deltaCurrent >= deltaGtt - deltaGtt / 10) {
    why = fmt::format("{} changed by {:+} bytes for {} bytes of GTT: charged to the cgroup",
                      cgroup::file::kMemoryCurrent, deltaCurrent, deltaGtt);
    return ProbeOutcome::Charged;
  }
  if (deltaCurrent < deltaGtt / 4) {
    why = fmt::format("{} changed by {:+} bytes for {} bytes of GTT: not charged",
                      cgroup::file::kMemoryCurrent, deltaCurrent, deltaGtt);
    return ProbeOutcome::NotCharged;
  }
  why = fmt::format(
      "{} changed by {:+} bytes for {} bytes of GTT: partly charged, neither verdict holds",
      cgroup::file::kMemoryCurrent, deltaCurrent, deltaGtt);
  return ProbeOutcome::Inconclusive;
}

CoverageVerdict decide(const StaticSigns& signs, const std::optional<ProbeResult>& probe,
                       const std::string& kernel, bool gpuPresent) {
  CoverageVerdict v;
  if (probe && probe->outcome == ProbeOutcome::Charged) {
    v.coverage = Coverage::HostAndGtt;
    v.basis = fmt::format("active probe on {} ({}, {}): {}", kernel, probe->driver, probe->device,
                          probe->detail);
    v.line = fmt::format(
        "A lease's MemoryMax covers: host memory + GTT (verified by active probe on {})", kernel);
    return v;
  }
  v.line = "A lease's MemoryMax covers: host memory only";
  std::vector<std::string> why;
  if (probe) {
    why.push_back(
        fmt::format("active probe: {} ({})", probeOutcomeName(probe->outcome), probe->detail));
  }
  if (signs.suggestsCharging()) {
    std::vector<std::string> names;
    for (const auto& s : signs.signs) {
      if (s.suggestsCharging && s.present.value_or(false)) names.push_back(s.name);
    }
    why.push_back(
        fmt::format("static signs suggest GTT charging ({}) but no active probe verified it{}",
                    fmt::join(names, ", "), probe ? "" : "; run tally doctor --active"));
  } else if (!probe) {
    why.push_back("no sign that this kernel charges GTT to memcg");
  }
  if (auto gtt = signs.dmemGttRegions(); !gtt.empty()) {
    why.push_back(
        fmt::format("a dmem region for GTT exists ({}): {} could bound GTT per cgroup (a kernel "
                    "limit, not memcg charging); tally does not set it yet",
                    fmt::join(gtt, ", "), cgroup::file::kDmemMax));
  }
  why.push_back(gpuPresent ? "tally bounds GTT itself (gpu_memory_max, from DRM fdinfo)"
                           : "no GPU here: nothing uncharged to bound");
  v.basis = fmt::format("{}", fmt::join(why, "; "));
  return v;
}

nlohmann::ordered_json signsJson(const StaticSigns& s) {
  auto a = nlohmann::ordered_json::array();
  for (const auto& sign : s.signs) {
    a.push_back({{"name", sign.name},
                 {"present", sign.present ? nlohmann::ordered_json(*sign.present)
                                          : nlohmann::ordered_json(nullptr)},
                 {"suggests_charging", sign.suggestsCharging},
                 {"evidence", sign.evidence}});
  }
  return a;
}

nlohmann::ordered_json probeJson(const ProbeResult& p) {
  auto opt = [](const std::optional<std::int64_t>& v) {
    return jsonview::orNull<nlohmann::ordered_json>(v);
  };
  return {
      {"outcome", probeOutcomeName(p.outcome)},
      {"kernel", p.kernel},
      {"driver", p.driver},
      {"device", p.device},
      {"cgroup", p.cgroup},
      {"requested_bytes", p.requestedBytes},
      {"delta_memory_current_bytes", opt(p.deltaMemoryCurrent)},
      {"delta_drm_total_gtt_bytes", opt(p.deltaDrmTotalGtt)},
      {"gtt_key", p.gttKey.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(p.gttKey)},
      {"delta_gpu_active_bytes", opt(p.deltaGpuActive)},
      {"detail", p.detail}};
}

}  // namespace tally::coverage
