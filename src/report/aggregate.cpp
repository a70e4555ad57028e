#include "report/aggregate.h"

#include <algorithm>
#include <limits>

namespace tally::report {

void Sum::add(const std::optional<std::uint64_t>& v) {
  any = true;
  if (!v) {
    complete = false;
    return;
  }
  if (__builtin_add_overflow(value, *v, &value)) complete = false;
}

std::optional<std::uint64_t> Sum::get() const {
  if (!any || !complete) return std::nullopt;
  return value;
}

RegionMap clientRegions(const scanner::Client& c) {
  RegionMap out;
  for (const auto& [name, r] : c.info.regions) {
    RegionSums s;
    auto res = probes::residentOf(r);
    s.resident.add(res ? std::optional<std::uint64_t>(res->bytes) : std::nullopt);
    s.total.add(r.total);
    s.shared.add(r.shared);
    out.emplace(name, s);
  }
  return out;
}

void addInto(RegionMap& into, const RegionMap& from) {
  for (const auto& [name, s] : from) {
    RegionSums& d = into[name];
    for (auto [dst, src] : {std::pair{&d.resident, &s.resident}, std::pair{&d.total, &s.total},
                            std::pair{&d.shared, &s.shared}}) {
      dst->add(src->get());
    }
  }
}

std::optional<std::uint64_t> kfdVramBytes(const scanner::Process& p) {
  if (p.kfdVram.empty()) return std::nullopt;
  std::uint64_t sum = 0;
  for (const auto& k : p.kfdVram) sum += k.bytes;
  return sum;
}

namespace {

void addOpt(std::optional<std::uint64_t>& into, std::optional<std::uint64_t> v) {
  if (!v) return;
  into = into.value_or(0) + *v;
}

}  // namespace

Aggregate aggregate(const scanner::Scan& scan, const HostFacts& host) {
  Aggregate a;
  for (const auto& c : scan.clients) a.clientRegions.push_back(clientRegions(c));

  std::map<std::string, CgroupGroup> cgroups;
  for (const auto& p : scan.processes) {
    RegionMap owned;
    std::vector<std::size_t> ownedIdx;
    for (auto i : p.clients) {
      if (scan.clients[i].owner != p.pid) continue;
      addInto(owned, a.clientRegions[i]);
      ownedIdx.push_back(i);
    }
    a.processRegions.push_back(owned);
    if (!p.cgroup) continue;
    CgroupGroup& g = cgroups[*p.cgroup];
    g.path = *p.cgroup;
    g.pids.push_back(p.pid);
    g.ownedClients.insert(g.ownedClients.end(), ownedIdx.begin(), ownedIdx.end());
    addInto(g.regions, owned);
    addOpt(g.kfdVramBytes, kfdVramBytes(p));
  }
  std::map<std::string, ContainerGroup> containers;
  for (auto& [path, g] : cgroups) g.workload = attribution::classifyCgroup(path);
  for (const auto& p : scan.processes)
    a.processWorkloads.push_back(p.cgroup ? cgroups.at(*p.cgroup).workload : std::nullopt);
  for (auto& [path, g] : cgroups) {
    std::string name = g.workload ? g.workload->name : path;
    ContainerGroup& c = containers[name];
    c.name = name;
    c.workload = g.workload;
    c.cgroups.push_back(path);
    c.pids.insert(c.pids.end(), g.pids.begin(), g.pids.end());
    addInto(c.regions, g.regions);
    c.clients += g.ownedClients.size();
    addOpt(c.kfdVramBytes, g.kfdVramBytes);
    a.cgroups.push_back(g);
  }
  for (auto& [name, c] : containers) a.containers.push_back(std::move(c));

  const bool hostScope = !scan.scopeCgroup.has_value();
  for (std::size_t d = 0; d < scan.devices.devices.size(); ++d) {
    const auto& dev = scan.devices.devices[d];
    DeviceSummary s;
    s.device = &dev;
    for (std::size_t i = 0; i < scan.clients.size(); ++i) {
      if (scan.clients[i].device != d) continue;
      ++s.clients;
      addInto(s.attributed, a.clientRegions[i]);
    }
    if (!hostScope) {
      s.unattributedNote = "cgroup-scoped scan: clients outside the cgroup are not seen";
    } else {
      for (const auto& m : dev.memory) {
        if (!m.usedBytes) continue;
        std::uint64_t attributed = 0;
        if (auto it = s.attributed.find(m.region); it != s.attributed.end()) {
          auto r = it->second.resident.get();
          if (!r) continue;  // some client's resident figure unknown: no honest difference
          attributed = *r;
        }
        constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
        if (*m.usedBytes > kMax || attributed > kMax) continue;
        s.unattributed[m.region] =
            static_cast<std::int64_t>(*m.usedBytes) - static_cast<std::int64_t>(attributed);
      }
      if (!scan.unreadable.empty())
        s.unattributedNote = "includes the memory of processes whose fds could not be read";
    }
    s.gttCeilings = devices::gttCeilings(dev, host.ttm, host.pageSize);
    s.gttHeadroomBytes = devices::gttHeadroom(dev, s.gttCeilings, devices::GttConsumer::Smaller,
                                              host.meminfo.memAvailable);
    if (s.gttHeadroomBytes) {
      s.gttCeilings.forConsumer(devices::GttConsumer::Smaller, &s.gttHeadroomCeiling);
    } else {
      const devices::DeviceMemory* gtt = dev.region("gtt");
      s.gttHeadroomUnknown = !gtt || !gtt->usedBytes ? "the device exports no mem_info_gtt_used"
                             : !host.meminfo.memAvailable ? "MemAvailable unknown"
                                                          : "no GTT ceiling is known";
    }
    a.devices.push_back(std::move(s));
  }
  return a;
}

}  // namespace tally::report
