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
#include "contain/host_layout.h"
#include "report/gpu_report.h"

namespace tally::cli {
namespace {

using json = nlohmann::ordered_json;

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

  auto layout = contain::readHostLayout(roots->proc, roots->cgroup ? &*roots->cgroup : nullptr,
                                       roots->cgroupError.value_or(""));
  const std::string& init = layout.pid1;
  bool systemd = layout.systemd;
  bool v2Root = layout.v2Root;
  doc["kernel"] = layout.kernel;
  doc["init"] = {{"pid1_comm", init}, {"systemd", systemd}, {"evidence", roots->proc.describe("1/comm")}};
  json cg;
  cg["root"] = paths.cgroup;
  cg["v2_root"] = v2Root;
  if (v2Root) cg["controllers"] = layout.controllers;
  cg["evidence"] = layout.v2RootEvidence;
  cg["cgroup2_mounts"] = layout.v2Mounts;
  cg["memory_v1_mounts"] = layout.memoryV1Mounts;
  cg["memory_controller"] = layout.memoryController();
  doc["cgroup"] = cg;
  const auto& v2Mounts = layout.v2Mounts;
  const auto& memoryV1 = layout.memoryV1Mounts;
  const auto& problems = layout.problems;

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

  bool containable = layout.containable();
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
