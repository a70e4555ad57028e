#include "devices/gtt_ceiling.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>

#include "probes/sysfs_value.h"
#include "util/text.h"
#include "util/units.h"

namespace tally::devices {

GttCeilings gttCeilings(const DrmDevice& d, const TtmModules& ttm, std::uint64_t pageSize) {
  GttCeilings c;
  if (const DeviceMemory* gtt = d.region("gtt"); gtt && gtt->totalBytes) {
    c.graphics.bytes = *gtt->totalBytes;
    c.graphics.source = "mem_info_gtt_total (bytes)";
  } else {
    c.graphics.unknown = "the device exports no mem_info_gtt_total";
  }
  const TtmModule* m = ttm.serving(d.driver, c.ttmHow);
  if (m) c.ttmModule = m->name;
  if (d.driver != "amdgpu") {
    c.compute.unknown =
        fmt::format("no compute (KFD) ceiling: that is amdgpu's, and this device's driver is {}",
                    d.driver.empty() ? "unknown" : d.driver);
  } else if (!m) {
    c.compute.unknown = "the TTM module serving amdgpu is unknown: " + c.ttmHow;
  } else if (!m->pagesLimit) {
    c.compute.unknown = m->pagesLimitUnknown.value_or(m->name + ".pages_limit unreadable");
  } else {
    c.compute.bytes = text::mulU64(*m->pagesLimit, pageSize);
    if (c.compute.bytes)
      c.compute.source =
          fmt::format("{}.pages_limit = {} pages of {} bytes", m->name, *m->pagesLimit, pageSize);
    else
      c.compute.unknown = "pages_limit x page size overflows";
  }
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

AmdgpuGttsize readAmdgpuGttsize(const fs::Root& sys) {
  AmdgpuGttsize g;
  const char* rel = "module/amdgpu/parameters/gttsize";
  if (auto v = sys.read(rel, 64)) {
    g.mib = probes::parseSysfsI64(*v);
    if (!g.mib) g.unreadable = fmt::format("{} reads '{}'", sys.describe(rel), text::trim(*v));
  } else if (v.error().code != ENOENT) {
    g.unreadable = v.error().message;  // 0600: root only
  }
  return g;
}

std::optional<std::string> gttsizeAdvice(const AmdgpuGttsize& g, const TtmModules& ttm,
                                         std::uint64_t pageSize) {
  if (!g.set() || pageSize == 0) return std::nullopt;
  std::string how;
  const TtmModule* m = ttm.serving("amdgpu", how);
  std::string module = m ? m->name : "ttm";
  auto bytes = text::mulU64(static_cast<std::uint64_t>(*g.mib), std::uint64_t{1} << 20);
  if (!bytes) return std::nullopt;
  std::uint64_t pages = *bytes / pageSize;
  std::string rocm =
      m && m->pagesLimit
          ? fmt::format("{} ({} = {} pages)",
                        units::humanBytes(text::mulU64(*m->pagesLimit, pageSize).value_or(0)),
                        module + ".pages_limit", *m->pagesLimit)
          : module + ".pages_limit";
  return fmt::format(
      "amdgpu.gttsize={} is set: it is deprecated (the kernel asks for {}.pages_limit) and "
      "ROCm does not see it: ROCm's GTT ceiling is {}. To give graphics and ROCm the same {}, "
      "set {}.pages_limit={} on the kernel command line (or 'options {} pages_limit={}' in "
      "/etc/modprobe.d/) and drop amdgpu.gttsize",
      *g.mib, module, rocm, units::humanBytes(*bytes), module, pages, module, pages);
}

}  // namespace tally::devices
