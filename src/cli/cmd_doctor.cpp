// `tally doctor`: what this host offers a lease, each line with the evidence
// it read. This first version covers the kernel, init, the cgroup layout and
// the GPU devices; the GTT -> memcg coverage probe builds on it.
#include "cli/cmd_doctor.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli/exit_codes.h"
#include "cli/host_facts.h"
#include "cli/roots.h"
#include "devices/drm_devices.h"
#include "probes/mountinfo.h"
#include "report/gpu_report.h"
#include "util/text.h"

namespace tally::cli {
namespace {

using json = nlohmann::ordered_json;

std::string firstLine(const Result<std::string>& r) {
  if (!r) return "";
  return std::string(text::trim(std::string_view(*r).substr(0, r->find('\n'))));
}

bool hasWord(std::string_view list, std::string_view word, char sep) {
  while (!list.empty()) {
    auto end = list.find(sep);
    if (text::trim(list.substr(0, end)) == word) return true;
    if (end == std::string_view::npos) break;
    list.remove_prefix(end + 1);
  }
  return false;
}

}  // namespace

void addDoctorCommand(CLI::App& app, DoctorOptions& opts) {
  auto* doctor = app.add_subcommand("doctor", "What this host offers a lease: init, cgroups, GPUs, GTT ceiling");
  doctor->footer(
      "Exit status: 0 when a lease can be contained here (systemd or a cgroup v2 root with the\n"
      "memory controller), 1 when it cannot (the report says why), 3 when /proc or /sys is unreadable.");
  doctor->add_flag("--json", opts.json, "print the report as JSON");
}

int runDoctor(const fs::RootPaths& paths, const DoctorOptions& opts) {
  auto roots = openRoots(paths);
  if (!roots) return kExitEnvironment;
  json doc;
  std::vector<std::string> problems;

  doc["kernel"] = firstLine(roots->proc.read("sys/kernel/osrelease", 256));
  std::string init = firstLine(roots->proc.read("1/comm", 256));
  bool systemd = init == "systemd";
  doc["init"] = {{"pid1_comm", init}, {"systemd", systemd}, {"evidence", roots->proc.describe("1/comm")}};
  if (!systemd) problems.push_back("no systemd (PID 1 is " + (init.empty() ? "unknown" : init) + ")");

  // cgroup layout: the cgroup root is a v2 root when it has cgroup.controllers.
  json cg;
  cg["root"] = paths.cgroup;
  bool v2Root = false, memoryOnV2 = false;
  if (roots->cgroup) {
    auto controllers = roots->cgroup->read("cgroup.controllers", 4096);
    v2Root = controllers.ok();
    if (v2Root) {
      std::string list = firstLine(controllers);
      memoryOnV2 = hasWord(list, "memory", ' ');
      cg["v2_root"] = true;
      cg["controllers"] = list;
      cg["evidence"] = roots->cgroup->describe("cgroup.controllers");
    } else {
      cg["v2_root"] = false;
      cg["evidence"] = controllers.error().message;
    }
  } else {
    cg["v2_root"] = false;
    cg["evidence"] = *roots->cgroupError;
  }
  std::vector<std::string> v2Mounts, memoryV1;
  if (auto mi = roots->proc.read("self/mountinfo", 1 << 20)) {
    for (const auto& m : probes::parseMountinfo(*mi)) {
      if (m.fsType == "cgroup2") v2Mounts.push_back(m.mountPoint);
      if (m.fsType == "cgroup" && hasWord(m.superOptions, "memory", ',')) memoryV1.push_back(m.mountPoint);
    }
    cg["cgroup2_mounts"] = v2Mounts;
    cg["memory_v1_mounts"] = memoryV1;
  }
  cg["memory_controller"] = memoryOnV2 ? "cgroup v2" : !memoryV1.empty() ? "cgroup v1" : "absent";
  doc["cgroup"] = cg;
  if (!memoryOnV2) {
    problems.push_back(!memoryV1.empty() ? "memory controller is on cgroup v1"
                       : v2Root          ? "memory controller not enabled at the cgroup v2 root"
                                         : "no cgroup v2 memory controller");
  }

  auto devices = devices::discoverDrmDevices(roots->sys);
  auto host = readHostFacts(roots->proc, roots->sys);
  json devs = json::array();
  if (devices) {
    for (const auto& d : devices->devices) {
      devs.push_back({{"key", d.key}, {"driver", d.driver}, {"memory", report::deviceMemoryJson(d)}});
    }
  }
  doc["gpu_devices"] = devs;
  if (host.gtt.bytes) doc["gtt_ceiling"] = {{"bytes", *host.gtt.bytes}, {"source", host.gtt.source}};
  else doc["gtt_ceiling"] = {{"unknown", "no ttm/amdttm pages_limit or amdgpu gttsize readable"}};
  if (host.meminfo.memAvailable) doc["mem_available_bytes"] = *host.meminfo.memAvailable;

  bool containable = systemd ? memoryOnV2 : (v2Root && memoryOnV2);
  std::string verdict = containable ? "leases can be contained here"
                                    : "leases cannot be contained here: " + fmt::format("{}", fmt::join(problems, "; "));
  doc["verdict"] = verdict;

  if (opts.json) {
    fmt::print("{}\n", doc.dump(2));
  } else {
    fmt::print("kernel      {}\n", doc["kernel"].get<std::string>());
    fmt::print("init        PID 1 is {}{}\n", init.empty() ? "?" : init, systemd ? "" : " (not systemd)");
    fmt::print("cgroup      {} {}\n", paths.cgroup, v2Root ? "is a cgroup v2 root" : "is not a cgroup v2 root");
    if (!v2Mounts.empty()) fmt::print("            cgroup2 mounted at {}\n", fmt::join(v2Mounts, ", "));
    fmt::print("memory      controller: {}{}\n", cg["memory_controller"].get<std::string>(),
               memoryV1.empty() ? "" : fmt::format(" ({})", fmt::join(memoryV1, ", ")));
    if (devs.empty()) fmt::print("gpu         no DRM devices\n");
    for (const auto& d : devs) fmt::print("gpu         {} ({})\n", d["key"].get<std::string>(), d["driver"].get<std::string>());
    if (host.gtt.bytes) fmt::print("gtt ceiling {} ({})\n", report::humanBytes(*host.gtt.bytes), host.gtt.source);
    else fmt::print("gtt ceiling unknown (no ttm module parameters)\n");
    if (host.meminfo.memAvailable) fmt::print("host        MemAvailable {}\n", report::humanBytes(*host.meminfo.memAvailable));
    fmt::print("verdict     {}\n", verdict);
  }
  return containable ? kExitOk : kExitDegraded;
}

}  // namespace tally::cli
