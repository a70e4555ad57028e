#include "coverage/charge_probe_readings.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

#include "probes/drm_fdinfo.h"
#include "probes/sysfs_value.h"

namespace tally::coverage::charge_probe {

FdinfoReading readFdinfo(const fs::Root& proc, pid_t pid, int fd) {
  FdinfoReading r;
  std::string rel = fmt::format("{}/fdinfo/{}", pid, fd);
  auto t = proc.read(rel, 64 * 1024);
  if (!t) {
    r.absent = fmt::format("cannot read {}: {}", proc.describe(rel), t.error().message);
    return r;
  }
  auto info = probes::parseDrmFdinfo(*t);
  for (const auto& [name, s] : info.regions) {
    if (s.total)
      r.regions[name] = {*s.total, "drm-total-" + name};
    else if (s.memory)
      r.regions[name] = {*s.memory, "drm-memory-" + name};
    else if (s.resident)
      r.regions[name] = {*s.resident, "drm-resident-" + name};
  }
  if (r.regions.empty())
    r.absent = fmt::format("the driver prints no memory figure in fdinfo ({})", proc.describe(rel));
  return r;
}

Figure fdinfoDelta(const FdinfoReading& before, const FdinfoReading& after) {
  Figure f;
  if (!before.absent.empty() || !after.absent.empty()) {
    f.absent = !after.absent.empty() ? after.absent : before.absent;
    return f;
  }
  std::int64_t sum = 0;
  std::vector<std::string> moved, read;
  for (const auto& [name, v] : after.regions) {
    auto b = before.regions.find(name);
    std::int64_t was = b == before.regions.end() ? 0 : static_cast<std::int64_t>(b->second.first);
    std::int64_t d = static_cast<std::int64_t>(v.first) - was;
    sum += d;
    read.push_back(v.second);
    if (d != 0) moved.push_back(v.second);
  }
  f.bytes = sum;
  f.source = fmt::format("{}", fmt::join(moved.empty() ? read : moved, "+"));
  return f;
}

MemInfoReading readMemInfo(const fs::Root& sys, const std::string& sysNode) {
  MemInfoReading r;
  std::vector<std::string> files;
  for (const char* region : {"gtt", "vram"}) {
    std::string rel = fmt::format("{}/device/mem_info_{}_used", sysNode, region);
    auto t = sys.read(rel, 64);
    if (!t) continue;
    auto v = probes::parseSysfsU64(*t);
    if (!v) {
      r.absent = fmt::format("{} is not a number", sys.describe(rel));
      r.used.reset();
      return r;
    }
    r.used = r.used.value_or(0) + *v;
    files.push_back(fmt::format("mem_info_{}_used", region));
  }
  if (!r.used)
    r.absent = fmt::format("the device exports no mem_info_*_used ({})",
                           sys.describe(sysNode + "/device"));
  r.source = fmt::format("{}", fmt::join(files, "+"));
  return r;
}

Figure memInfoDelta(const MemInfoReading& before, const MemInfoReading& after) {
  Figure f;
  if (!before.used || !after.used) {
    f.absent = !after.absent.empty() ? after.absent : before.absent;
    return f;
  }
  f.bytes = static_cast<std::int64_t>(*after.used) - static_cast<std::int64_t>(*before.used);
  f.source = after.source;
  return f;
}

}  // namespace tally::coverage::charge_probe
