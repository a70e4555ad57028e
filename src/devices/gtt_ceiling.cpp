#include "devices/gtt_ceiling.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>

#include "devices/driver_catalogue.h"
#include "probes/sysfs_value.h"
#include "util/text.h"
#include "util/units.h"

namespace tally::devices {
namespace {

constexpr std::uint64_t kReserveMemLimit = 3ULL << 29;  // AMDGPU_RESERVE_MEM_LIMIT, 1.5 GiB

Ceiling known(std::uint64_t bytes, std::string source) { return {bytes, std::move(source), {}}; }
Ceiling unknown(std::string why) { return {std::nullopt, "", std::move(why)}; }

// KFD's TTM limit since about 6.5: the pages_limit of the TTM module serving amdgpu.
Ceiling pagesLimitTerm(const TtmModules& ttm, std::uint64_t pageSize) {
  std::string how;
  const TtmModule* m = ttm.serving("amdgpu", how);
  if (!m) return unknown("the TTM module serving amdgpu is unknown: " + how);
  if (!m->pagesLimit)
    return unknown(m->pagesLimitUnknown.value_or(m->name + ".pages_limit unreadable"));
  auto bytes = text::mulU64(*m->pagesLimit, pageSize);
  if (!bytes) return unknown("pages_limit x page size overflows");
  return known(*bytes, fmt::format("{}.pages_limit = {} pages of {} bytes", m->name, *m->pagesLimit,
                                   pageSize));
}

std::string ceilingText(const Ceiling& c) {
  return c.bytes ? fmt::format("{} ({})", units::humanBytes(*c.bytes), c.source)
                 : fmt::format("unknown ({})", c.unknown.value_or("?"));
}

}  // namespace

AmdgpuParams readAmdgpuParams(const fs::Root& sys) {
  AmdgpuParams p;
  const char* gttsize = "module/amdgpu/parameters/gttsize";
  if (auto v = sys.read(gttsize, 64)) {
    p.gttsizeMib = probes::parseSysfsI64(*v);
    if (!p.gttsizeMib)
      p.gttsizeUnreadable = fmt::format("{} reads '{}'", sys.describe(gttsize), text::trim(*v));
  } else if (v.error().code != ENOENT) {
    p.gttsizeUnreadable = v.error().message;  // 0600: root only
  }
  const char* noLimit = "module/amdgpu/parameters/no_system_mem_limit";
  if (auto v = sys.read(noLimit, 64)) {
    auto t = text::trim(*v);
    if (t == "Y" || t == "1") p.noSystemMemLimit = true;
    if (t == "N" || t == "0") p.noSystemMemLimit = false;
    p.noSystemMemLimitEvidence = fmt::format("{} = {}", sys.describe(noLimit), t);
  } else {
    p.noSystemMemLimitEvidence = fmt::format("{}: {}", sys.describe(noLimit), v.error().message);
  }
  return p;
}

KfdLimits kfdLimits(const KfdLimitInputs& in) {
  KfdLimits k;
  const bool systemOff = in.amdgpu && in.amdgpu->noSystemMemLimit.value_or(false);
  if (systemOff) {
    k.system.applies = false;
    k.system.value.source = "amdgpu.no_system_mem_limit=1: not applied";
  }
  if (!in.kernel) {
    k.era = "unknown: the kernel release could not be read";
    k.ttm.value = unknown("the kernel release is unknown, so which KFD limits apply is unknown");
    if (!systemOff) k.system.value = k.ttm.value;
    return k;
  }
  const auto& kernel = *in.kernel;
  if (!kernel.atLeast(6, 5)) {
    k.era = "before 6.5";
    k.ttm.value = unknown(fmt::format(
        "unknown before 6.5 (this is {}): KFD used 3/8 of the RAM free when amdgpu loaded",
        kernel.text));
  } else {
    k.era = kernel.atLeast(6, 7) ? "6.7 and later" : "6.5 to 6.6";
    k.ttm.value = in.ttm ? pagesLimitTerm(*in.ttm, in.pageSize) : unknown("no TTM module read");
  }
  if (systemOff) return k;
  if (!kernel.atLeast(6, 7)) {
    k.system.value = unknown(fmt::format(
        "unknown before 6.7 (this is {}): KFD used 15/16 of the RAM free when amdgpu loaded",
        kernel.text));
  } else if (!in.memTotalBytes) {
    k.system.value = unknown("MemTotal is unknown");
  } else {
    // amdgpu_amdkfd_gpuvm_init_mem_limits: MemTotal less 1/64, less 1.5 GiB
    // (halved instead when that would leave under 3 GiB).
    std::uint64_t mem = *in.memTotalBytes;
    std::uint64_t limit = mem - (mem >> 6);
    if (limit < 2 * kReserveMemLimit) {
      limit >>= 1;
      k.system.value = known(limit, fmt::format("(MemTotal {} - MemTotal/64) / 2, KFD {}",
                                                units::humanBytes(mem), k.era));
    } else {
      limit -= kReserveMemLimit;
      k.system.value = known(limit, fmt::format("MemTotal {} - MemTotal/64 - 1.5 GiB, KFD {}",
                                                units::humanBytes(mem), k.era));
    }
  }
  return k;
}

GttCeilings gttCeilings(const DrmDevice& d, const TtmModules& ttm, const KfdLimits& kfd) {
  GttCeilings c;
  if (const DeviceMemory* gtt = d.region("gtt"); gtt && gtt->totalBytes)
    c.graphics = known(*gtt->totalBytes, "mem_info_gtt_total (bytes)");
  else
    c.graphics = unknown("the device exports no mem_info_gtt_total");
  const TtmModule* m = ttm.serving(d.driver, c.ttmHow);
  if (m) c.ttmModule = m->name;
  if (!servedByKfd(d.driver)) {
    c.compute = unknown(
        fmt::format("no compute (KFD) ceiling: that is amdgpu's, and this device's driver is {}",
                    d.driver.empty() ? "unknown" : d.driver));
    return c;
  }
  c.computeTerms = {{"GTT manager", c.graphics, true}, kfd.ttm, kfd.system};
  const CeilingTerm* smallest = nullptr;
  for (const auto& t : c.computeTerms) {
    if (!t.applies) continue;
    if (!t.value.bytes) {
      c.compute = t.value;  // the first unknown cap makes the ceiling unknown
      return c;
    }
    if (!smallest || *t.value.bytes < *smallest->value.bytes) smallest = &t;
  }
  if (smallest)
    c.compute = known(*smallest->value.bytes,
                      fmt::format("{}: {}", smallest->name, smallest->value.source));
  return c;
}

std::optional<std::uint64_t> GttCeilings::forConsumer(GttConsumer c, const char** which) const {
  auto pick = [&](const Ceiling& ceiling, GttConsumer name) -> std::optional<std::uint64_t> {
    if (ceiling.bytes && which) *which = gttConsumerName(name);
    return ceiling.bytes;
  };
  switch (c) {
    case GttConsumer::Graphics:
      return pick(graphics, GttConsumer::Graphics);
    case GttConsumer::Compute:
      return pick(compute, GttConsumer::Compute);
    case GttConsumer::Smaller:
      if (graphics.bytes && compute.bytes)
        return *compute.bytes < *graphics.bytes ? pick(compute, GttConsumer::Compute)
                                                : pick(graphics, GttConsumer::Graphics);
      return graphics.bytes ? pick(graphics, GttConsumer::Graphics)
                            : pick(compute, GttConsumer::Compute);
  }
  return std::nullopt;
}

std::string GttCeilings::smallerInWords() const {
  const char* which = nullptr;
  if (!forConsumer(GttConsumer::Smaller, &which)) return "";
  const char* why = !graphics.bytes || !compute.bytes   ? "the only one known"
                    : *graphics.bytes == *compute.bytes ? "the two are equal"
                                                        : "the smaller";
  return fmt::format("the {} ceiling ({})", which, why);
}

std::optional<std::uint64_t> gttFree(const DrmDevice& d, const GttCeilings& ceilings,
                                     GttConsumer consumer) {
  const DeviceMemory* gtt = d.region("gtt");
  auto ceiling = ceilings.forConsumer(consumer);
  if (!gtt || !gtt->usedBytes || !ceiling) return std::nullopt;
  return *ceiling > *gtt->usedBytes ? *ceiling - *gtt->usedBytes : 0;
}

std::optional<std::uint64_t> gttHeadroom(const DrmDevice& d, const GttCeilings& ceilings,
                                         GttConsumer consumer,
                                         std::optional<std::uint64_t> memAvailable) {
  auto free = gttFree(d, ceilings, consumer);
  if (!free || !memAvailable) return std::nullopt;
  return std::min(*free, *memAvailable);
}

RocmPlacement rocmPlacement(const DrmDevice& d,
                            const std::optional<probes::KernelRelease>& kernel) {
  RocmPlacement p;
  if (!servedByKfd(d.driver)) {
    p.evidence = "not an amdgpu device: no ROCm (KFD)";
    return p;
  }
  const DeviceMemory* vram = d.region("vram");
  const DeviceMemory* gtt = d.region("gtt");
  if (!vram || !vram->totalBytes || !gtt || !gtt->totalBytes) {
    p.evidence = "the device exports no mem_info_vram_total and mem_info_gtt_total";
    return p;
  }
  if (kernel && !kernel->atLeast(6, 10)) {
    p.where = RocmPlacement::Where::Vram;
    p.evidence = fmt::format(
        "kernel {} is older than about 6.10, when amdgpu began placing an APU's VRAM-flagged ROCm "
        "memory in GTT: it is in VRAM (the carve-out)",
        kernel->text);
    return p;
  }
  if (*vram->totalBytes < *gtt->totalBytes) {
    p.where = RocmPlacement::Where::Gtt;
    p.evidence = fmt::format(
        "mem_info_vram_total {} < mem_info_gtt_total {}: on an APU the kernel places ROCm's "
        "VRAM-flagged memory in GTT (apu_prefer_gtt)",
        units::humanBytes(*vram->totalBytes), units::humanBytes(*gtt->totalBytes));
  } else {
    p.where = RocmPlacement::Where::Vram;
    p.evidence =
        fmt::format("mem_info_vram_total {} >= mem_info_gtt_total {}: ROCm uses VRAM",
                    units::humanBytes(*vram->totalBytes), units::humanBytes(*gtt->totalBytes));
  }
  return p;
}

std::optional<std::string> gttAdvice(const AmdgpuParams& amdgpu, const TtmModules& ttm,
                                     const KfdLimits& kfd, std::uint64_t pageSize) {
  if (pageSize == 0) return std::nullopt;
  std::string how;
  const TtmModule* m = ttm.serving("amdgpu", how);
  const std::string module = m ? m->name : "ttm";
  // Not a conditional expression: g++ 12 -O2 sees an uninitialised optional in it.
  std::optional<std::uint64_t> systemLimit;
  if (kfd.system.applies) systemLimit = kfd.system.value.bytes;
  auto setLine = [&](std::uint64_t pages) {
    return fmt::format(
        "set {}.pages_limit={} on the kernel command line (or 'options {} pages_limit={}' in "
        "/etc/modprobe.d/)",
        module, pages, module, pages);
  };
  if (amdgpu.gttsizeSet()) {
    auto bytes =
        text::mulU64(static_cast<std::uint64_t>(*amdgpu.gttsizeMib), std::uint64_t{1} << 20);
    if (!bytes) return std::nullopt;
    std::uint64_t target = systemLimit ? std::min(*bytes, *systemLimit) : *bytes;
    std::string advice = fmt::format(
        "amdgpu.gttsize={} ({}) is set: it is deprecated (the kernel asks for {}.pages_limit). It "
        "sizes the GTT manager (mem_info_gtt_total), which caps graphics and ROCm alike; ROCm is "
        "also capped by the {} ({}) and the {} ({}). To give graphics and ROCm the same {}, {} "
        "and drop amdgpu.gttsize",
        *amdgpu.gttsizeMib, units::humanBytes(*bytes), module, kfd.ttm.name,
        ceilingText(kfd.ttm.value), kfd.system.name,
        kfd.system.applies ? ceilingText(kfd.system.value) : kfd.system.value.source,
        units::humanBytes(target), setLine(target / pageSize));
    if (systemLimit && *bytes > *systemLimit)
      advice += fmt::format(
          " (that is the KFD system limit: ROCm never gets more, whatever the GTT size)");
    return advice;
  }
  if (m && m->pagesLimit && systemLimit) {
    auto bytes = text::mulU64(*m->pagesLimit, pageSize);
    if (bytes && *bytes > *systemLimit)
      return fmt::format(
          "{}.pages_limit={} ({}) is above the KFD system limit ({}): ROCm stops there while "
          "graphics may take up to {}. To give both the same ceiling, {}",
          module, *m->pagesLimit, units::humanBytes(*bytes), ceilingText(kfd.system.value),
          units::humanBytes(*bytes), setLine(*systemLimit / pageSize));
  }
  return std::nullopt;
}

}  // namespace tally::devices
