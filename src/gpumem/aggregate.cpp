#include "gpumem/aggregate.h"

#include <algorithm>
#include <limits>

namespace tally::gpumem {

Aggregate aggregate(const scanner::Scan& scan, const host::Snapshot& host) {
  Aggregate a;
  for (const auto& c : scan.clients) a.clientRegions.push_back(clientRegions(scan, c));
  for (const auto& r : a.clientRegions)
    a.clientCounted.push_back(countGpuMemory({&r}, std::nullopt));
  auto counted = [&](const std::vector<std::size_t>& clients, const std::optional<KfdFigure>& kfd) {
    std::vector<const ClientRegions*> maps;
    for (auto i : clients) maps.push_back(&a.clientRegions[i]);
    return countGpuMemory(maps, kfd);
  };

  std::map<std::string, CgroupGroup> cgroups;
  std::vector<std::size_t> allClients(scan.clients.size());
  for (std::size_t i = 0; i < allClients.size(); ++i) allClients[i] = i;
  std::optional<KfdFigure> allKfd;
  for (const auto& p : scan.processes) {
    RegionMap owned;
    std::vector<std::size_t> ownedIdx;
    for (auto i : p.clients) {
      if (scan.clients[i].owner != p.pid) continue;
      addInto(owned, a.clientRegions[i].regions);
      ownedIdx.push_back(i);
    }
    auto kfd = kfdFigure(p, scan.devices, host.kernel);
    a.processRegions.push_back(owned);
    a.processCounted.push_back(counted(ownedIdx, kfd));
    a.processKfd.push_back(kfd);
    addInto(allKfd, kfd);
    if (!p.cgroup) continue;
    CgroupGroup& g = cgroups[*p.cgroup];
    g.path = *p.cgroup;
    g.pids.push_back(p.pid);
    g.ownedClients.insert(g.ownedClients.end(), ownedIdx.begin(), ownedIdx.end());
    addInto(g.regions, owned);
    addInto(g.kfd, kfd);
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
    addInto(c.kfd, g.kfd);
    a.cgroups.push_back(g);
  }
  for (auto& g : a.cgroups) g.counted = counted(g.ownedClients, g.kfd);
  for (auto& [name, c] : containers) {
    std::vector<std::size_t> owned;
    for (const auto& g : a.cgroups)
      if (std::find(c.cgroups.begin(), c.cgroups.end(), g.path) != c.cgroups.end())
        owned.insert(owned.end(), g.ownedClients.begin(), g.ownedClients.end());
    c.counted = counted(owned, c.kfd);
    a.containers.push_back(std::move(c));
  }
  a.scopeCounted = counted(allClients, allKfd);

  const bool hostScope = !scan.scopeCgroup.has_value();
  for (std::size_t d = 0; d < scan.devices.devices.size(); ++d) {
    const auto& dev = scan.devices.devices[d];
    DeviceSummary s;
    s.device = &dev;
    for (std::size_t i = 0; i < scan.clients.size(); ++i) {
      if (scan.clients[i].device != d) continue;
      ++s.clients;
      addInto(s.attributed, a.clientRegions[i].regions);
      if (a.clientRegions[i].noFigures()) s.silent = true;
    }
    if (devices::driverFigures(dev.driver) == devices::DriverFigures::None) s.silent = true;
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
    s.gttCeilings = host.ceilings(dev);
    s.rocm = host.rocm(dev);
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

}  // namespace tally::gpumem
