#include "coverage/coverage.h"

#include <fmt/format.h>

#include "cgroup/cgroup.h"
#include "probes/cgroup_memory.h"
#include "probes/dmem.h"
#include "probes/meminfo.h"
#include "util/text.h"

namespace tally::coverage {

bool StaticSigns::suggestsCharging() const {
  for (const auto& s : signs) {
    if (s.suggestsCharging && s.present.value_or(false)) return true;
  }
  return false;
}

namespace {

Sign moduleParam(const fs::Root& sys, const std::string& module) {
  Sign s{module + ".ttm_memcg", false, "", true};
  std::string rel = "module/" + module + "/parameters/ttm_memcg";
  auto v = sys.read(rel, 64);
  if (!v) {
    s.evidence = fmt::format("{} absent (no memcg integration in {})", sys.describe(rel), module);
    return s;
  }
  std::string value(text::trim(*v));
  s.present = value == "Y" || value == "1";
  s.evidence = fmt::format("{} = {}", sys.describe(rel), value);
  return s;
}

bool isVramRegion(std::string_view name) {
  auto slash = name.rfind('/');
  std::string_view last = slash == std::string_view::npos ? name : name.substr(slash + 1);
  return text::startsWith(last, "vram");
}

}  // namespace

StaticSigns readStaticSigns(const fs::Root& proc, const fs::Root& sys, const fs::Root* cgroupRoot,
                            const std::string& statCgroup) {
  StaticSigns out;
  namespace file = cgroup::file;
  Sign stat{fmt::format("{} gpu_active", file::kMemoryStat), std::nullopt, "", true};
  std::optional<cgroup::Cgroup> root;
  std::string rootError = "no cgroup v2 root";
  if (cgroupRoot) {
    if (auto r = cgroup::Cgroup::open(*cgroupRoot, "/"))
      root.emplace(std::move(*r));
    else
      rootError = r.error().message;
  }
  if (!cgroupRoot) {
    stat.evidence = rootError;
  } else if (auto cg = cgroup::Cgroup::open(*cgroupRoot, statCgroup.empty() ? "/" : statCgroup);
             !cg) {
    stat.evidence = fmt::format("{}: {}", statCgroup, cg.error().message);
  } else if (auto parsed = cg->memoryStat(); !parsed) {
    stat.evidence = fmt::format("{}: {}", cg->describe(file::kMemoryStat), parsed.error().message);
  } else {
    stat.present = parsed->get("gpu_active").has_value();
    stat.evidence = *stat.present
                        ? fmt::format("{} has gpu_active {}", cg->describe(file::kMemoryStat),
                                      *parsed->get("gpu_active"))
                        : fmt::format("{} has no gpu_active key", cg->describe(file::kMemoryStat));
  }
  out.signs.push_back(stat);
  out.signs.push_back(moduleParam(sys, "ttm"));
  out.signs.push_back(moduleParam(sys, "amdttm"));

  Sign dmem{"dmem GTT region", std::nullopt, "", true};
  if (!root) {
    dmem.evidence = rootError;
  } else if (auto cap = root->read(file::kDmemCapacity); !cap) {
    dmem.present = false;
    dmem.evidence =
        fmt::format("{} absent (no dmem controller)", root->describe(file::kDmemCapacity));
  } else if (auto regions = probes::parseDmemCapacity(*cap); !regions) {
    dmem.evidence = fmt::format("{} unparsable", root->describe(file::kDmemCapacity));
  } else {
    for (const auto& r : *regions) {
      out.dmemRegions.push_back(fmt::format("{} {}", r.name, r.bytes));
      if (!isVramRegion(r.name)) out.dmemGttRegions.push_back(r.name);
    }
    dmem.present = !out.dmemGttRegions.empty();
    dmem.evidence = regions->empty()
                        ? fmt::format("{} lists no region", root->describe(file::kDmemCapacity))
                        : fmt::format("{}: {}", root->describe(file::kDmemCapacity),
                                      fmt::join(out.dmemRegions, ", "));
  }
  out.signs.push_back(dmem);

  // GPUActive is global (v7.1+): the kernel counts GPU pages, not per cgroup.
  Sign meminfo{"/proc/meminfo GPUActive", std::nullopt, "", false};
  if (auto text = proc.read("meminfo", 64 * 1024)) {
    auto mi = probes::parseMemInfo(*text);
    meminfo.present = mi.gpuActive.has_value();
    meminfo.evidence =
        mi.gpuActive ? fmt::format("GPUActive {} bytes (global GPU page counter, not per cgroup)",
                                   *mi.gpuActive)
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
    why = fmt::format("{} grew by {} bytes for {} bytes of GTT: charged to the cgroup",
                      cgroup::file::kMemoryCurrent, deltaCurrent, deltaGtt);
    return ProbeOutcome::Charged;
  }
  if (deltaCurrent < deltaGtt / 4) {
    why = fmt::format("{} grew by {} bytes for {} bytes of GTT: not charged",
                      cgroup::file::kMemoryCurrent, deltaCurrent, deltaGtt);
    return ProbeOutcome::NotCharged;
  }
  why =
      fmt::format("{} grew by {} bytes for {} bytes of GTT: partly charged, neither verdict holds",
                  cgroup::file::kMemoryCurrent, deltaCurrent, deltaGtt);
  return ProbeOutcome::Inconclusive;
}

const char* coverageName(Coverage c) { return c == Coverage::HostAndGtt ? "host+gtt" : "host"; }

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
  if (!signs.dmemGttRegions.empty()) {
    why.push_back(
        fmt::format("a dmem region for GTT exists ({}): {} could bound GTT per cgroup; tally does "
                    "not use it yet",
                    fmt::join(signs.dmemGttRegions, ", "), cgroup::file::kDmemMax));
  }
  why.push_back(gpuPresent ? "tally bounds GTT itself (gpu_memory_max, from DRM fdinfo)"
                           : "no GPU here: nothing uncharged to bound");
  v.basis = fmt::format("{}", fmt::join(why, "; "));
  v.degraded = gpuPresent;
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
    return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
  };
  return {{"outcome", probeOutcomeName(p.outcome)},
          {"kernel", p.kernel},
          {"driver", p.driver},
          {"device", p.device},
          {"cgroup", p.cgroup},
          {"requested_bytes", p.requestedBytes},
          {"delta_memory_current_bytes", opt(p.deltaMemoryCurrent)},
          {"delta_drm_total_gtt_bytes", opt(p.deltaDrmTotalGtt)},
          {"delta_gpu_active_bytes", opt(p.deltaGpuActive)},
          {"detail", p.detail}};
}

}  // namespace tally::coverage
