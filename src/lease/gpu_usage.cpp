#include "lease/gpu_usage.h"

#include <algorithm>

#include "lease/meter.h"

namespace tally::lease {

LeaseGpu leaseGpuUsage(const std::vector<report::RegionMap>& clients,
                       std::optional<std::uint64_t> kfdVramBytes) {
  struct Acc {
    std::uint64_t resident = 0, shared = 0, maxShared = 0, maxResident = 0;
    bool complete = true;
  };
  std::map<std::string, Acc> acc;
  for (const auto& client : clients) {
    for (const auto& [region, sums] : client) {
      Acc& a = acc[region];
      auto resident = sums.resident.get();
      if (!resident) {
        a.complete = false;
        continue;
      }
      a.resident += *resident;
      a.maxResident = std::max(a.maxResident, *resident);
      // A client's shared figure counts buffers it holds with anyone; only
      // what it also has resident can have been counted twice.
      std::uint64_t shared = std::min(sums.shared.get().value_or(0), *resident);
      a.shared += shared;
      a.maxShared = std::max(a.maxShared, shared);
    }
  }
  LeaseGpu out;
  out.source = "drm-fdinfo";
  std::uint64_t sum = 0;
  bool complete = true;
  for (const auto& [region, a] : acc) {
    if (!a.complete) {  // a partial region figure would be an undercount
      complete = complete && !countsAsGpuMemory(region);
      continue;
    }
    std::uint64_t again = a.shared - a.maxShared;
    std::uint64_t bytes = std::max(a.resident - again, a.maxResident);
    out.sharedCountedOnce += a.resident - bytes;
    out.regions[region] = bytes;
  }
  if (kfdVramBytes) {
    auto it = out.regions.find("vram");
    if (it == out.regions.end() || *kfdVramBytes > it->second) {
      out.regions["vram"] = *kfdVramBytes;
      out.source = "drm-fdinfo+kfd-sysfs";
    }
  }
  for (const auto& [region, bytes] : out.regions) {
    if (countsAsGpuMemory(region)) sum += bytes;
  }
  if (complete) out.bytes = sum;
  return out;
}

}  // namespace tally::lease
