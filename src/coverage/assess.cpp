#include "coverage/assess.h"

#include "probes/proc_cgroup.h"

namespace tally::coverage {

std::string ownCgroup(const fs::Root& proc) {
  auto text = proc.read("self/cgroup", 64 * 1024);
  if (!text) return "/";
  auto parsed = probes::parseProcCgroup(*text);
  if (!parsed || parsed->deleted || parsed->outsideNamespace) return "/";
  return parsed->path;
}

Assessment assess(const fs::Root& proc, const fs::Root& sys, const fs::Root* cgroupRoot,
                  const devices::DeviceMap& devices, const std::string& kernel,
                  const std::string& statCgroup, const std::optional<ProbeOptions>& probe) {
  Assessment a;
  a.kernel = kernel;
  a.signs = readStaticSigns(proc, sys, cgroupRoot, statCgroup, devices::readTtmModules(sys));
  for (const auto& d : devices.devices) {
    if (d.region("gtt") || hasProbe(probeDriver(d))) a.gpuPresent = true;
  }
  if (probe) {
    if (cgroupRoot) {
      a.probe = runActiveProbe(proc, *cgroupRoot, devices, kernel, *probe);
    } else {
      ProbeResult r;
      r.kernel = kernel;
      r.detail = "no cgroup v2 root to make the probe's cgroup in";
      a.probe = r;
    }
  }
  a.verdict = decide(a.signs, a.probe, kernel, a.gpuPresent);
  return a;
}

}  // namespace tally::coverage
