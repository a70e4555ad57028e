#include "lease/meter.h"

#include <fmt/format.h>

#include <algorithm>

#include "gpumem/gpu_memory.h"
#include "gpumem/regions.h"
#include "scanner/scan.h"
#include "util/clock.h"
#include "util/text.h"

namespace tally::lease {

LeaseMeter::LeaseMeter(const fs::Root& proc, const fs::Root& sys, const cgroup::Cgroup& cg,
                       std::optional<std::uint64_t> gpuMemoryMax)
    : proc_(proc), sys_(sys), cgroup_(cg), gpuMemoryMax_(gpuMemoryMax) {}

void LeaseMeter::sample(host::Snapshot* host) {
  std::uint64_t now = clock::realtimeNs();
  std::optional<host::Snapshot> own;
  if (!host) host = &own.emplace(host::readSnapshot(proc_, sys_));
  sampleHost(now);
  sampleGpu(now, *host);
  sampledAtNs_ = now;
}

void LeaseMeter::sampleHost(std::uint64_t nowNs) {
  host_.last.reset();
  host_.lastStatGpu.reset();
  auto current = cgroup_.memoryCurrent();
  if (!current) {
    host_.lastError = current.error().message;
    return;
  }
  ++host_.samples;
  host_.last = *current;
  std::optional<probes::FlatKeyed> stat;
  if (readStatGpu_) {
    if (auto st = cgroup_.memoryStat()) {
      host_.lastStatGpu = st->get("gpu_active").value_or(0) + st->get("dmem").value_or(0);
      stat = std::move(*st);
    }
  }
  if (!host_.peakCurrent || *current > *host_.peakCurrent) {
    host_.peakCurrent = *current;
    host_.peakAtNs = nowNs;
    if (!stat)
      if (auto st = cgroup_.memoryStat()) stat = std::move(*st);
    if (stat) host_.statAtPeak = std::move(*stat);
  }
}

void LeaseMeter::sampleGpu(std::uint64_t nowNs, host::Snapshot& host) {
  gpu_.lastBytes.reset();
  gpu_.lastHostUncharged.reset();
  gpu_.lastUnknown.reset();
  gpu_.lastKfdBytes.reset();
  gpu_.lastRegions.clear();
  gpu_.lastClasses.clear();
  gpu_.lastDevices.clear();
  scanner::Scanner scanner(proc_, sys_);
  scanner.useHandles(&handles_);
  scanner.useHost(&host.devices, &host.kfd);
  auto scan = scanner.scanCgroup(cgroup_);
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
  std::vector<gpumem::ClientRegions> clients;
  clients.reserve(scan->clients.size());
  for (const auto& c : scan->clients) {
    clients.push_back(gpumem::clientRegions(*scan, c));
    if (c.device) {
      const std::string& key = scan->devices.devices[*c.device].key;
      if (std::find(gpu_.lastDevices.begin(), gpu_.lastDevices.end(), key) ==
          gpu_.lastDevices.end())
        gpu_.lastDevices.push_back(key);
    }
  }
  std::sort(gpu_.lastDevices.begin(), gpu_.lastDevices.end());
  std::optional<gpumem::KfdFigure> kfd;
  for (const auto& p : scan->processes)
    gpumem::addInto(kfd, gpumem::kfdFigure(p, scan->devices, host.kernel));
  std::vector<const gpumem::ClientRegions*> maps;
  for (const auto& c : clients) maps.push_back(&c);
  gpumem::GpuMemory usage = gpumem::countGpuMemory(maps, kfd);
  for (const auto& [region, cls] : usage.classes) gpu_.classesSeen[region] = cls;
  for (const auto& [region, bytes] : usage.regions) {
    auto& peak = gpu_.regionPeaks[region];
    if (bytes > peak) peak = bytes;
  }
  gpu_.maxClients = std::max<std::uint64_t>(gpu_.maxClients, scan->clients.size());
  gpu_.lastSource = usage.source;
  if (kfd) gpu_.lastKfdBytes = kfd->bytes;
  if (!usage.bytes) {
    ++gpu_.samplesIncomplete;
    gpu_.lastUnknown = usage.unknown;
    gpu_.unknownSeen = usage.unknown;
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
