#include "daemon/host_check.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>

#include "daemon/headroom.h"
#include "util/units.h"

namespace tally::daemon {

// What the daemon would find on this host: problems it would refuse to start
// with, and warnings about settings that cannot mean what they say here.
HostFindings checkOnHost(const config::Config& c, const host::Snapshot& host) {
  HostFindings f;
  if (!c.daemon.metricsTextfile.empty()) {
    const std::string& file = c.daemon.metricsTextfile;
    std::string dir = file.substr(0, std::max<std::size_t>(file.rfind('/'), 1));
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      f.problems.push_back(fmt::format(
          "daemon.metrics_textfile: the directory {} does not exist; create it (e.g. install -d -m "
          "0755 {}) or change the path: the daemon would not start",
          dir, dir));
  }
  std::vector<std::string> here;
  for (const auto& d : host.devices.devices)
    if (d.pdev) here.push_back(*d.pdev);
  for (const auto& p : c.pools) {
    for (const auto& dev : p.devices) {
      if (std::find(here.begin(), here.end(), dev) == here.end())
        f.warnings.push_back(fmt::format(
            "pools.{}.devices: {} is not a DRM device on this host ({}); its GPU headroom cannot "
            "be measured here",
            p.name, dev,
            here.empty() ? std::string("none here")
                         : fmt::format("here: {}", fmt::join(here, ", "))));
    }
    auto totals = poolTotals(p, host);
    if (p.memoryBudget && totals.hostBytes && *p.memoryBudget > *totals.hostBytes)
      f.warnings.push_back(fmt::format(
          "pools.{}.memory_budget {} is more than this host's memory (MemTotal {}): holders "
          "will be bounded by headroom first",
          p.name, units::humanBytes(*p.memoryBudget), units::humanBytes(*totals.hostBytes)));
    if (p.gpuMemoryBudget && totals.gpuBytes && *p.gpuMemoryBudget > *totals.gpuBytes)
      f.warnings.push_back(fmt::format(
          "pools.{}.gpu_memory_budget {} is more than the pool's devices hold (GTT ceiling + "
          "VRAM: {})",
          p.name, units::humanBytes(*p.gpuMemoryBudget), units::humanBytes(*totals.gpuBytes)));
  }
  return f;
}

}  // namespace tally::daemon
