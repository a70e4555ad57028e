#include "lease/meter.h"

#include <fmt/format.h>

#include <algorithm>

#include "lease/gpu_usage.h"
#include "report/aggregate.h"
#include "probes/sysfs_value.h"
#include "scanner/scan.h"
#include "util/clock.h"
#include "util/text.h"

namespace tally::lease {

FinalCounters readFinalCounters(const fs::Root& root, const std::string& cgroup) {
  FinalCounters c;
  c.cgroup = cgroup;
  if (auto peak = root.read(fs::joinPath(cgroup, "memory.peak"), 64)) {
    if (auto v = probes::parseSysfsU64(*peak)) c.memoryPeak = *v;
    else c.memoryPeakUnknown = fmt::format("memory.peak reads '{}'", text::trim(*peak));
  } else {
    c.memoryPeakUnknown = peak.error().code == ENOENT ? "no memory.peak (needs Linux 5.19)" : peak.error().message;
  }
  if (auto swap = root.read(fs::joinPath(cgroup, "memory.swap.peak"), 64)) {
    c.swapPeak = probes::parseSysfsU64(*swap);
  }
  if (auto st = root.read(fs::joinPath(cgroup, "memory.stat"), 64 * 1024)) c.stat = probes::parseFlatKeyed(*st);
  if (auto ev = root.read(fs::joinPath(cgroup, "memory.events"), 4096)) {
    c.events = probes::parseFlatKeyed(*ev);
    if (!c.events) c.eventsUnknown = "memory.events is malformed";
  } else {
    c.eventsUnknown = ev.error().message;
  }
  return c;
}

bool countsAsGpuMemory(const std::string& region) { return region == "gtt" || region == "vram"; }

LeaseMeter::LeaseMeter(const fs::Root& proc, const fs::Root& sys, const fs::Root& cgroupRoot, std::string cgroup,
                       std::optional<std::uint64_t> gpuMemoryMax)
    : proc_(proc), sys_(sys), cgroupRoot_(cgroupRoot), cgroup_(std::move(cgroup)), gpuMemoryMax_(gpuMemoryMax) {
  rel_ = fs::joinPath(cgroup_, "");
}

void LeaseMeter::sample() {
  std::uint64_t now = clock::realtimeNs();
  sampleHost(now);
  sampleGpu(now);
  sampledAtNs_ = now;
}

void LeaseMeter::sampleHost(std::uint64_t nowNs) {
  host_.last.reset();
  auto text = cgroupRoot_.read(rel_ + "memory.current", 64);
  if (!text) {
    host_.lastError = text.error().message;
    return;
  }
  auto current = probes::parseSysfsU64(*text);
  if (!current) {
    host_.lastError = fmt::format("memory.current reads '{}'", *text);
    return;
  }
  ++host_.samples;
  host_.last = *current;
  if (!host_.peakCurrent || *current > *host_.peakCurrent) {
    host_.peakCurrent = *current;
    host_.peakAtNs = nowNs;
    if (auto stat = cgroupRoot_.read(rel_ + "memory.stat", 64 * 1024)) host_.statAtPeak = probes::parseFlatKeyed(*stat);
  }
}

void LeaseMeter::sampleGpu(std::uint64_t nowNs) {
  gpu_.lastBytes.reset();
  gpu_.lastRegions.clear();
  gpu_.lastDevices.clear();
  scanner::Scanner scanner(proc_, sys_);
  auto scan = scanner.scanCgroup(cgroupRoot_, cgroup_);
  if (!scan) {
    gpu_.lastError = scan.error().message;
    return;
  }
  ++gpu_.samples;
  if (!scan->unreadable.empty()) {
    ++gpu_.samplesWithUnreadable;
    gpu_.lastUnreadable = fmt::format("pid {}: {}", scan->unreadable.front().pid, scan->unreadable.front().reason);
  }
  std::vector<report::RegionMap> clients;
  clients.reserve(scan->clients.size());
  for (const auto& c : scan->clients) {
    clients.push_back(report::clientRegions(c));
    if (c.device) {
      const std::string& key = scan->devices.devices[*c.device].key;
      if (std::find(gpu_.lastDevices.begin(), gpu_.lastDevices.end(), key) == gpu_.lastDevices.end()) gpu_.lastDevices.push_back(key);
    }
  }
  std::sort(gpu_.lastDevices.begin(), gpu_.lastDevices.end());
  std::optional<std::uint64_t> kfd;
  for (const auto& p : scan->processes) {
    if (auto v = report::kfdVramBytes(p)) kfd = kfd.value_or(0) + *v;
  }
  LeaseGpu usage = leaseGpuUsage(clients, kfd);
  for (const auto& [region, bytes] : usage.regions) {
    auto& peak = gpu_.regionPeaks[region];
    if (bytes > peak) peak = bytes;
  }
  gpu_.maxClients = std::max<std::uint64_t>(gpu_.maxClients, scan->clients.size());
  gpu_.lastSource = usage.source;
  if (!usage.bytes) {
    ++gpu_.samplesIncomplete;
    return;
  }
  std::uint64_t sum = *usage.bytes;
  gpu_.lastBytes = sum;
  gpu_.lastRegions = std::move(usage.regions);
  if (gpuMemoryMax_ && sum > *gpuMemoryMax_) ++gpu_.samplesOverBudget;
  if (!gpu_.peakBytes || sum > *gpu_.peakBytes) {
    gpu_.peakBytes = sum;
    gpu_.peakAtNs = nowNs;
    gpu_.atPeak = gpu_.lastRegions;  // copied on a new peak only
  }
}

}  // namespace tally::lease
