#include "lease/meter.h"

#include <fmt/format.h>

#include <algorithm>

#include "report/gpu_memory.h"
#include "report/regions.h"
#include "scanner/scan.h"
#include "util/clock.h"
#include "util/text.h"

namespace tally::lease {

LeaseMeter::LeaseMeter(const fs::Root& proc, const fs::Root& sys, const fs::Root& cgroupRoot,
                       const cgroup::Cgroup& cg, std::optional<std::uint64_t> gpuMemoryMax)
    : proc_(proc), sys_(sys), cgroupRoot_(cgroupRoot), cgroup_(cg), gpuMemoryMax_(gpuMemoryMax) {}

void LeaseMeter::sample(scanner::TickShared* shared) {
  std::uint64_t now = clock::realtimeNs();
  sampleHost(now);
  sampleGpu(now, shared);
  sampledAtNs_ = now;
}

void LeaseMeter::sampleHost(std::uint64_t nowNs) {
  host_.last.reset();
  auto current = cgroup_.memoryCurrent();
  if (!current) {
    host_.lastError = current.error().message;
    return;
  }
  ++host_.samples;
  host_.last = *current;
  if (!host_.peakCurrent || *current > *host_.peakCurrent) {
    host_.peakCurrent = *current;
    host_.peakAtNs = nowNs;
    if (auto stat = cgroup_.memoryStat()) host_.statAtPeak = std::move(*stat);
  }
}

void LeaseMeter::sampleGpu(std::uint64_t nowNs, scanner::TickShared* shared) {
  gpu_.lastBytes.reset();
  gpu_.lastHostUncharged.reset();
  gpu_.lastRegions.clear();
  gpu_.lastClasses.clear();
  gpu_.lastDevices.clear();
  scanner::Scanner scanner(proc_, sys_);
  scanner.useHandles(&handles_);
  scanner.useTickShared(shared);
  auto scan = scanner.scanCgroup(cgroupRoot_, cgroup_.path());
  if (!scan) {
    gpu_.lastError = scan.error().message;
    return;
  }
  ++gpu_.samples;
  if (!scan->unreadable.empty()) {
    ++gpu_.samplesWithUnreadable;
    gpu_.lastUnreadable =
        fmt::format("pid {}: {}", scan->unreadable.front().pid, scan->unreadable.front().reason);
  }
  std::vector<report::RegionMap> clients;
  clients.reserve(scan->clients.size());
  for (const auto& c : scan->clients) {
    clients.push_back(report::clientRegions(*scan, c));
    if (c.device) {
      const std::string& key = scan->devices.devices[*c.device].key;
      if (std::find(gpu_.lastDevices.begin(), gpu_.lastDevices.end(), key) ==
          gpu_.lastDevices.end())
        gpu_.lastDevices.push_back(key);
    }
  }
  std::sort(gpu_.lastDevices.begin(), gpu_.lastDevices.end());
  std::optional<std::uint64_t> kfd;
  for (const auto& p : scan->processes) {
    if (auto v = report::kfdVramBytes(p)) kfd = kfd.value_or(0) + *v;
  }
  std::vector<const report::RegionMap*> maps;
  for (const auto& c : clients) maps.push_back(&c);
  report::GpuMemory usage = report::countGpuMemory(maps, kfd);
  for (const auto& [region, cls] : usage.classes) gpu_.classesSeen[region] = cls;
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
  gpu_.lastHostUncharged = usage.hostUncharged;
  gpu_.lastRegions = std::move(usage.regions);
  gpu_.lastClasses = std::move(usage.classes);
  if (gpuMemoryMax_ && sum > *gpuMemoryMax_) ++gpu_.samplesOverBudget;
  if (!gpu_.peakBytes || sum > *gpu_.peakBytes) {
    gpu_.peakBytes = sum;
    gpu_.peakAtNs = nowNs;
    gpu_.atPeak = gpu_.lastRegions;  // copied on a new peak only
  }
}

}  // namespace tally::lease
