// `tally gpu`'s table: per device, then one row per process, cgroup or
// container, the totals, and what could not be read.
#include "report/gpu_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "devices/driver_catalogue.h"
#include "report/device_memory.h"
#include "util/text.h"
#include "util/units.h"

namespace tally::report {

using namespace gpumem;
namespace {

// Region columns: gtt and vram first (the APU story), then the rest by name.
std::vector<std::string> regionColumns(const Aggregate& agg) {
  std::set<std::string> all;
  for (const auto& r : agg.clientRegions)
    for (const auto& [name, s] : r.regions) all.insert(name);
  std::vector<std::string> out;
  for (const char* first : {"gtt", "vram"})
    if (all.erase(first)) out.emplace_back(first);
  out.insert(out.end(), all.begin(), all.end());
  return out;
}

std::string gttCeilingLines(const devices::GttCeilings& c) {
  if (!c.graphics.bytes && !c.compute.bytes && c.computeTerms.empty()) return "";
  auto one = [](const char* name, const devices::Ceiling& x) {
    return x.bytes ? fmt::format("{} {} ({})", name, units::humanBytes(*x.bytes), x.source)
                   : fmt::format("{} unknown", name);
  };
  std::string out = fmt::format("  GTT ceiling: {}; {}\n", one("graphics", c.graphics),
                                one("compute (ROCm)", c.compute));
  for (const auto& line : computeTermLines(c)) out += "    compute cap: " + line + "\n";
  return out;
}

std::string cell(const RegionMap& regions, const std::string& region) {
  auto it = regions.find(region);
  if (it == regions.end()) return "-";
  auto v = it->second.resident.get();
  return v ? units::humanBytes(*v) : "?";
}

}  // namespace

namespace {
// Exactly `width` columns: cut at the end (names) or at the start (paths,
// whose end says most) with "…". Names and paths here are ASCII or cut at a
// UTF-8 boundary.
std::string fitRight(const std::string& s, std::size_t width) {
  if (s.size() <= width) return s + std::string(width - s.size(), ' ');
  return text::truncateUtf8(s, width - 1) + "…";
}
std::string fitLeft(const std::string& s, std::size_t width) {
  if (s.size() <= width) return s + std::string(width - s.size(), ' ');
  std::size_t from = s.size() - (width - 1);
  while (from < s.size() && (static_cast<unsigned char>(s[from]) & 0xC0) == 0x80) ++from;
  std::string tail = "…" + s.substr(from);
  return tail + std::string(width - 1 - (s.size() - from), ' ');
}
}  // namespace

std::string gpuTable(const scanner::Scan& scan, const Aggregate& agg, const host::Snapshot& host,
                     GroupBy by, const UserNameFn& userName) {
  std::string out;
  if (scan.devices.devices.empty()) {
    out += "No DRM devices: nothing under /sys/class/drm (no GPU, or its driver is not loaded).\n";
  }
  // The driver as sysfs names it, else as its clients' fdinfo does (a platform
  // device may have no driver link), else "?".
  auto driverOf = [&](const devices::DrmDevice& d) -> std::string {
    if (!d.driver.empty()) return d.driver;
    for (const auto& c : scan.clients) {
      if (c.device && scan.devices.devices[*c.device].key == d.key && !c.info.driver.empty())
        return c.info.driver + " (from fdinfo)";
    }
    return "?";
  };
  for (const auto& s : agg.devices) {
    const auto& d = *s.device;
    std::string nodes;
    for (const auto& n : d.nodes) nodes += (nodes.empty() ? "" : " ") + n.name;
    out += fmt::format("device {} driver {} ({})\n", d.key, driverOf(d), nodes);
    for (const auto& m : d.memory) {
      out += fmt::format("  {:<9} used {:>10} of {:>10}", m.region,
                         m.usedBytes ? units::humanBytes(*m.usedBytes) : "?",
                         m.totalBytes ? units::humanBytes(*m.totalBytes) : "?");
      if (auto it = s.unattributed.find(m.region); it != s.unattributed.end()) {
        auto v = it->second;
        out += fmt::format("   unattributed {}{}", v < 0 ? "-" : "",
                           units::humanBytes(static_cast<std::uint64_t>(v < 0 ? -v : v)));
      }
      out += "\n";
    }
    out += gttCeilingLines(s.gttCeilings);
    if (devices::servedByKfd(d.driver))
      out += fmt::format("  ROCm device memory (hipMalloc): {} ({})\n",
                         s.rocm.where == devices::RocmPlacement::Where::Gtt    ? "GTT"
                         : s.rocm.where == devices::RocmPlacement::Where::Vram ? "VRAM"
                                                                               : "unknown",
                         s.rocm.evidence);
    if (s.silent)
      out +=
          "  memory: this driver prints no memory figure in fdinfo: its clients' GPU memory is "
          "unknown, and no gpu_memory_max can be checked on it\n";
    if (s.gttHeadroomBytes)
      out += fmt::format("  GTT headroom {} (against the {} ceiling, within MemAvailable)\n",
                         units::humanBytes(*s.gttHeadroomBytes), s.gttHeadroomCeiling);
  }
  if (host.meminfo.gpuActive && !scan.scopeCgroup) {
    std::int64_t outside = static_cast<std::int64_t>(*host.meminfo.gpuActive) -
                           static_cast<std::int64_t>(agg.scopeCounted.hostUncharged);
    // Clients can count more than GPUActive (a buffer shared across clients
    // of different processes is resident in each; GPUActive counts it once):
    // said so, never a bare negative.
    out += outside < 0
               ? fmt::format(
                     "GPUActive {} (the kernel's count, all GPUs); the clients' GTT and kin {}, "
                     "{} more than the kernel counts (a buffer shared between clients is "
                     "counted in each of them, once by the kernel)\n",
                     units::humanBytes(*host.meminfo.gpuActive),
                     units::humanBytes(agg.scopeCounted.hostUncharged),
                     units::humanBytes(static_cast<std::uint64_t>(-outside)))
               : fmt::format(
                     "GPUActive {} (the kernel's count, all GPUs); the clients' GTT and kin {}; "
                     "{} outside any client (kernel buffers{})\n",
                     units::humanBytes(*host.meminfo.gpuActive),
                     units::humanBytes(agg.scopeCounted.hostUncharged),
                     units::humanBytes(static_cast<std::uint64_t>(outside)),
                     scan.unreadable.empty() ? "" : ", or processes not read");
  }
  if (auto w = devices::gttAdvice(host.amdgpu, host.ttm, host.kfdLimits, host.pageSize))
    out += "warning: " + *w + "\n";

  auto columns = regionColumns(agg);
  std::string header;
  switch (by) {
    case GroupBy::kProcess:
      header = fmt::format("{:>8} {:<10} {:<16} {:<24}", "PID", "USER", "COMM", "CONTAINER");
      break;
    case GroupBy::kCgroup:
      header = fmt::format("{:<48}", "CGROUP");
      break;
    case GroupBy::kContainer:
      header = fmt::format("{:<32}", "CONTAINER");
      break;
  }
  for (const auto& c : columns) {
    std::string upper = c;
    for (auto& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    header += fmt::format(" {:>11}", upper);
  }
  header += fmt::format(" {:>7}", "CLIENTS");
  if (by == GroupBy::kProcess) header += "  CGROUP";
  out += "\n" + header + "\n";

  bool anyShared = false;
  auto row = [&](std::string lead, const RegionMap& regions, std::size_t clients,
                 const std::string& tail) {
    for (const auto& c : columns) lead += fmt::format(" {:>11}", cell(regions, c));
    lead += fmt::format(" {:>7}", clients);
    if (!tail.empty()) lead += "  " + tail;
    out += lead + "\n";
  };
  switch (by) {
    case GroupBy::kProcess:
      for (std::size_t i = 0; i < scan.processes.size(); ++i) {
        const auto& p = scan.processes[i];
        const auto& w = agg.processWorkloads[i];
        std::size_t owned = 0;
        bool shared = false;
        for (auto ci : p.clients) {
          owned += scan.clients[ci].owner == p.pid;
          shared = shared || scan.clients[ci].sharedAcrossProcesses;
        }
        anyShared = anyShared || shared;
        std::string comm = (shared ? "*" : "") + p.comm.value_or("?");
        if (p.holdsKfd) comm += " [kfd]";
        row(fmt::format("{:>8} {} {} {}", p.pid, fitRight(p.uid ? userName(*p.uid) : "?", 10),
                        fitRight(comm, 16), fitRight(w ? w->name : "-", 24)),
            agg.processRegions[i], owned, p.cgroup.value_or("?"));
      }
      break;
    case GroupBy::kCgroup:
      for (const auto& g : agg.cgroups)
        row(fitLeft(g.path, 48), g.regions, g.ownedClients.size(), "");
      break;
    case GroupBy::kContainer:
      for (const auto& c : agg.containers) row(fitRight(c.name, 32), c.regions, c.clients, "");
      break;
  }
  // One total per device: every client on it, once, whoever owns it.
  // With processes not read, a total is what the readable ones hold: at
  // least that much, marked so (">=").
  const bool lowerBound = !scan.unreadable.empty();
  if (!scan.processes.empty()) {
    for (const auto& s : agg.devices) {
      std::string what = fmt::format("{} {}", lowerBound ? "TOTAL>=" : "TOTAL", s.device->key);
      std::string lead = by == GroupBy::kProcess  ? fmt::format("{:>8} {}", "", fitRight(what, 52))
                         : by == GroupBy::kCgroup ? fitRight(what, 48)
                                                  : fitRight(what, 32);
      row(lead, s.attributed, s.clients, "");
    }
  }
  if (scan.processes.empty()) {
    out += "(no process holds a DRM or KFD device)\n";
  } else {
    out +=
        "\nMemory columns: resident bytes per DRM region (drm-fdinfo) of the clients each row "
        "owns;\n"
        "'-' = region not reported, '?' = reported without a resident figure. [kfd] = holds "
        "/dev/kfd.\n";
    if (anyShared)
      out +=
          "* = holds a DRM client shared with another process (counted once, in its owner's "
          "row).\n";
    if (lowerBound)
      out += fmt::format("TOTAL>= : a lower bound: {} not read (below) may hold more.\n",
                         scan.unreadable.size() == 1
                             ? "1 process"
                             : std::to_string(scan.unreadable.size()) + " processes");
  }
  // Unreadable processes are never silently dropped; a non-root run on a busy
  // host has hundreds, so the table names a few and counts the rest.
  constexpr std::size_t kShown = 8;
  for (std::size_t i = 0; i < scan.unreadable.size() && i < kShown; ++i)
    out +=
        fmt::format("unreadable: pid {}: {}\n", scan.unreadable[i].pid, scan.unreadable[i].reason);
  if (scan.unreadable.size() > kShown)
    out += fmt::format(
        "unreadable: {} more processes (--json lists them all); run as root or with "
        "CAP_SYS_PTRACE to read them\n",
        scan.unreadable.size() - kShown);
  return out;
}

}  // namespace tally::report
