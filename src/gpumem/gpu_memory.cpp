#include "gpumem/gpu_memory.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace tally::gpumem {

GpuMemory countGpuMemory(const std::vector<const ClientRegions*>& clients,
                         const std::optional<KfdFigure>& kfd) {
  struct Acc {
    std::uint64_t resident = 0, shared = 0, maxShared = 0, maxResident = 0;
    bool complete = true;
  };
  GpuMemory out;
  out.kfd = kfd;
  std::map<std::string, Acc> acc;
  std::set<std::string> silentDrivers;
  for (const ClientRegions* client : clients) {
    if (client->noFigures()) {
      silentDrivers.insert(client->driver.empty() ? "an unnamed driver" : client->driver);
      continue;
    }
    for (const auto& [region, sums] : client->regions) {
      auto [cls, inserted] = out.classes.try_emplace(region, sums.cls);
      // One name, two meanings (two drivers disagree): not counted, said as unknown.
      if (!inserted && cls->second != sums.cls) cls->second = devices::MemoryClass::Unknown;
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
  out.source = "drm-fdinfo";
  std::vector<std::string> incomplete;
  for (const auto& [region, a] : acc) {
    if (!a.complete) {  // a partial region figure would be an undercount
      if (devices::countedAsGpuMemory(out.classes[region])) incomplete.push_back(region);
      continue;
    }
    std::uint64_t again = a.shared - a.maxShared;
    std::uint64_t bytes = std::max(a.resident - again, a.maxResident);
    out.sharedCountedOnce += a.resident - bytes;
    out.regions[region] = bytes;
  }
  std::uint64_t sum = 0;
  for (const auto& [region, bytes] : out.regions) {
    devices::MemoryClass c = out.classes[region];
    if (!devices::countedAsGpuMemory(c)) continue;
    sum += bytes;
    if (c == devices::MemoryClass::HostUncharged) out.hostUncharged += bytes;
    if (c == devices::MemoryClass::HostMixed) out.hostMixed += bytes;
  }
  std::vector<std::string> why;
  if (!silentDrivers.empty())
    why.push_back(
        fmt::format("a client of {} prints no memory figures", fmt::join(silentDrivers, " and ")));
  if (!incomplete.empty())
    why.push_back(
        fmt::format("a client printed {} without a resident figure", fmt::join(incomplete, ", ")));
  if (!why.empty()) {
    out.unknown = fmt::format("{}", fmt::join(why, "; "));
    return out;
  }
  out.fdinfoBytes = sum;
  out.bytes = sum;
  // KFD as a floor: it raises the figure only past the whole fdinfo sum.
  if (kfd && kfd->bytes > sum) {
    out.kfdAbove = kfd->bytes - sum;
    out.bytes = kfd->bytes;
    out.hostUncharged += std::min(out.kfdAbove, kfd->inGttBytes);
    out.source = "drm-fdinfo+kfd-sysfs";
  }
  return out;
}

devices::BytesByClass bytesByClass(const std::map<std::string, std::uint64_t>& regions,
                                   const std::map<std::string, devices::MemoryClass>& classes) {
  devices::BytesByClass out;
  for (const auto& [region, bytes] : regions) {
    auto it = classes.find(region);
    auto& sum =
        devices::bytesOf(out, it == classes.end() ? devices::MemoryClass::Unknown : it->second);
    sum = sum.value_or(0) + bytes;
  }
  return out;
}

}  // namespace tally::gpumem
