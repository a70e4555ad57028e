#include "daemon/headroom.h"

#include <algorithm>

#include "lease/meter.h"

namespace tally::daemon {
namespace {

std::uint64_t unused(const std::optional<std::uint64_t>& declared,
                     const std::optional<std::uint64_t>& inUse) {
  if (!declared) return 0;
  if (!inUse) return *declared;
  return *declared > *inUse ? *declared - *inUse : 0;
}

std::uint64_t minus(std::uint64_t a, std::uint64_t b) { return a > b ? a - b : 0; }

}  // namespace

std::optional<std::uint64_t> deviceFree(const config::Pool& pool, const host::Snapshot& host) {
  std::optional<std::uint64_t> free;
  for (const auto& d : host.devices.devices) {
    if (!pool.devices.empty() && (!d.pdev || std::find(pool.devices.begin(), pool.devices.end(),
                                                       *d.pdev) == pool.devices.end())) {
      continue;
    }
    auto ceilings = host.ceilings(d);
    if (auto f = devices::gttFree(d, ceilings, pool.gttCeiling)) free = free.value_or(0) + *f;
    if (auto f = d.regionFree("vram")) free = free.value_or(0) + *f;
  }
  return free;
}

admission::Totals poolTotals(const config::Pool& pool, const host::Snapshot& host) {
  admission::Totals t;
  t.hostBytes = host.meminfo.memTotal;
  std::optional<std::uint64_t> gpu;
  for (const auto& d : host.devices.devices) {
    if (!pool.devices.empty() && (!d.pdev || std::find(pool.devices.begin(), pool.devices.end(),
                                                       *d.pdev) == pool.devices.end())) {
      continue;
    }
    const devices::DeviceMemory* gtt = d.region("gtt");
    const devices::DeviceMemory* vram = d.region("vram");
    if (!gtt && !vram) continue;  // no memory figures: not a device headroom counts either
    auto ceiling = host.ceilings(d).forConsumer(pool.gttCeiling);
    // A region whose size is unknown makes the whole total unknown: an
    // undercount would refuse a request that fits.
    if ((gtt && !ceiling) || (vram && !vram->totalBytes)) return t;
    gpu = gpu.value_or(0) + ceiling.value_or(0) + (vram ? *vram->totalBytes : 0);
  }
  t.gpuBytes = gpu;
  return t;
}

admission::Headroom poolHeadroom(const config::Pool& pool, const host::Snapshot& host,
                                 const std::vector<HolderUse>& holders) {
  admission::Headroom h;
  std::uint64_t hostPromised = 0, gpuPromised = 0;
  for (const auto& u : holders) {
    hostPromised += unused(u.memoryMax, u.memoryInUse);
    gpuPromised += unused(u.gpuMemoryMax, u.gpuInUse);
  }
  const auto& memAvailable = host.meminfo.memAvailable;
  if (memAvailable) h.hostBytes = minus(*memAvailable, hostPromised);
  if (auto free = deviceFree(pool, host)) {
    std::uint64_t f = memAvailable ? std::min(*free, *memAvailable) : *free;
    h.gpuBytes = minus(f, gpuPromised);
  }
  return h;
}

admission::Headroom PoolMeasures::headroomFor(const config::Pool& pool) {
  std::vector<HolderUse> holders;
  for (const auto& id : book_.engine().usage(pool.name).holders) {
    const Lease* l = book_.find(id);
    if (!l) continue;
    HolderUse u;
    u.memoryMax = l->req.declaration.memoryMax;
    u.gpuMemoryMax = l->req.declaration.gpuMemoryMax;
    if (l->metering().meter) {
      u.memoryInUse = hostOnly(*l);
      u.gpuInUse = l->metering().meter->gpu().lastBytes;
    }
    holders.push_back(u);
  }
  return poolHeadroom(pool, host_.recent(), holders);
}

void PoolMeasures::noteHeld(const fs::Root& proc, const fs::Root& sys, Lease& l) const {
  if (!l.place.cg) return;
  lease::LeaseMeter meter(proc, sys, *l.place.cg, l.plan().bound.max);
  meter.readStatGpu(handover_.statNamesGpu);
  meter.sample([this]() -> host::Snapshot& { return host_.fresh(); });
  // Held host memory is only what MemAvailable cannot count as free: its
  // anon and shmem pages (memory.stat). memory.current also holds page cache,
  // which MemAvailable already counts as free: taking it off the need too
  // would count it twice (a server with its model mmapped would need
  // nothing). Unread: nothing is held, the whole declaration is needed.
  std::optional<std::uint64_t> pinned;
  if (auto stat = l.place.cg->memoryStat()) {
    auto anon = stat->get("anon"), shmem = stat->get("shmem");
    if (anon) pinned = *anon + shmem.value_or(0);
  }
  auto hostOnly = handover_.hostOnly(meter.host().last, meter.host().lastStatGpu,
                                     meter.gpu().lastHostUncharged);
  if (pinned && hostOnly) l.req.heldHostBytes = std::min(*pinned, *hostOnly);
  l.req.heldGpuBytes = meter.gpu().lastBytes;
}

std::optional<std::uint64_t> PoolMeasures::hostOnly(const Lease& l) const {
  if (!l.metering().meter) return std::nullopt;
  const auto& m = *l.metering().meter;
  return handover_.hostOnly(m.host().last, m.host().lastStatGpu, m.gpu().lastHostUncharged);
}

}  // namespace tally::daemon
