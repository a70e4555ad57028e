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

void LeaseMeter::sample(const SnapshotSource& host) {
  std::uint64_t now = clock::realtimeNs();
  std::optional<host::Snapshot> own;
  SnapshotSource ownSource = [&]() -> host::Snapshot& {
    if (!own) own.emplace(host::readSnapshot(proc_, sys_));
    return *own;
  };
  cgroupsWalked_ = 0;
  sampleHost(now);
  sampleGpu(now, host ? host : ownSource);
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

bpf::LeaseCharge LeaseMeter::own(const bpf::LeaseCharge& c) const {
  if (!carried_) return c;
  const bpf::LeaseCharge& b = *carried_;
  auto since = [](std::uint64_t now, std::uint64_t then) { return now > then ? now - then : 0; };
  bpf::LeaseCharge o = c;
  // Its peak is the kernel's only once the kernel's rose past the carried one.
  o.peakBytes = c.peakBytes > b.peakBytes ? c.peakBytes : c.bytes;
  o.refused = since(c.refused, b.refused);
  o.refusedBytes = since(c.refusedBytes, b.refusedBytes);
  o.refusedFailsafe = since(c.refusedFailsafe, b.refusedFailsafe);
  o.untracked = since(c.untracked, b.untracked);
  o.underflows = since(c.underflows, b.underflows);
  o.movedIn = since(c.movedIn, b.movedIn);
  o.extraBytes = since(c.extraBytes, b.extraBytes);
  return o;
}

void LeaseMeter::sampleGpu(std::uint64_t nowNs, const SnapshotSource& host) {
  // Absent: not armed (its lease ended) or unreadable; fdinfo's figure stands.
  std::optional<bpf::LeaseCharge> charge;
  if (kernel_)
    if (auto c = kernel_->read(kernelCgroup_)) charge = own(*c);
  // Where the charge is the lease's figure, fdinfo (its floor, and the
  // per-region breakdown shown beside it) is walked when the charge moved or
  // a task moved in; every sample while the last walk found more than the
  // charge; after 1, 2, 4, ... samples while it found less (a buffer is
  // charged before its handle exists, and a busy host can hold the creator
  // between the two); otherwise once in kSteadyWalkEvery samples. A lease
  // holding still costs no per-process walk (it was most of the daemon's
  // CPU), and one whose fdinfo trails costs a walk per doubling.
  ++samplesSinceWalk_;
  unsigned due = disagreeingWalks_ == 0
                     ? kSteadyWalkEvery
                     : std::min(1u << std::min(disagreeingWalks_ - 1, 16u), kSteadyWalkEvery);
  bool walk = !charge || gpu_.walksFdinfoAbove > 0 || charge->bytes != chargeAtWalk_ ||
              charge->movedIn != movedInAtWalk_ || samplesSinceWalk_ >= due;
  bool walked = false;
  if (walk) {
    samplesSinceWalk_ = 0;
    sampleFdinfo(host());
    walked = true;
    if (kernel_) gpu_.lastFdinfoBytes = gpu_.lastBytes;
    if (charge) {
      bool moved = charge->bytes != chargeAtWalk_;
      chargeAtWalk_ = charge->bytes;
      movedInAtWalk_ = charge->movedIn;
      if (gpu_.lastBytes == charge->bytes || (gpu_.lastBytes && *gpu_.lastBytes > charge->bytes))
        disagreeingWalks_ = 0;
      else
        disagreeingWalks_ = moved ? 1 : disagreeingWalks_ + 1;
      if (gpu_.lastBytes && *gpu_.lastBytes > charge->bytes)
        ++gpu_.walksFdinfoAbove;
      else
        gpu_.walksFdinfoAbove = 0;
    }
  }
  std::uint64_t peak = gpu_.lastBytes.value_or(0);
  if (charge) {
    gpu_.kernel = *charge;
    std::uint64_t bytes = charge->bytes;
    // The larger of the two, named after whichever it is: fdinfo's only when
    // walked now (a figure from an earlier walk is stale) and above.
    if (walked && gpu_.lastBytes && *gpu_.lastBytes > bytes) {
      bytes = *gpu_.lastBytes;
    } else {
      gpu_.lastSource = "kernel-charge";
    }
    gpu_.lastBytes = bytes;
    // The kernel's peak is exact: it moves with every allocation, between samples too.
    peak = std::max(bytes, charge->peakBytes);
  }
  if (!gpu_.lastBytes) return;
  if (gpuMemoryMax_ && *gpu_.lastBytes > *gpuMemoryMax_) ++gpu_.samplesOverBudget;
  if (!gpu_.peakBytes || peak > *gpu_.peakBytes) {
    gpu_.peakBytes = peak;
    gpu_.peakAtNs = nowNs;
    gpu_.atPeak = gpu_.lastRegions;
  }
}

void LeaseMeter::sampleFdinfo(host::Snapshot& host) {
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
  if (index_) {
    if (++walksSinceIndexed_ >= kSteadyWalkEvery) {
      walksSinceIndexed_ = 0;
      index_->recheck(
          fmt::format("every cgroup looked at again, as every {} walks", kSteadyWalkEvery));
    }
    scanner.useIndex(index_.get());
  }
  cgroup::SubtreeLimits limits;
  const bool budgeted = walkLimit_ < limits.maxCgroups;
  limits.maxCgroups = std::min(limits.maxCgroups, walkLimit_);
  auto scan = scanner.scanCgroup(cgroup_, limits);
  const auto& walk = scanner.stats().walk;
  cgroupsWalked_ = walk.visited;
  lastWalkSize_ = walk.tooMany ? std::max(walk.visited, walkLimit_ + 1) : walk.visited;
  if (!scan) {
    gpu_.lastError = scan.error().message;
    if (budgeted && walk.tooMany)
      gpu_.lastError = fmt::format(
          "not walked this round: its owner's leases hold more cgroups than the daemon walks "
          "for one user per sample round ({}); the GPU figure is not read (absent, not 0)",
          walkBudget_);
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
}

}  // namespace tally::lease
