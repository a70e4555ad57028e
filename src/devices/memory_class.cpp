#include "devices/memory_class.h"

#include <algorithm>

#include "devices/driver_catalogue.h"

namespace tally::devices {
namespace {

bool matches(const RegionRule& rule, std::string_view region) {
  if (region.substr(0, rule.name.size()) != rule.name) return false;
  switch (rule.match) {
    case RegionMatch::Exact:
      return region.size() == rule.name.size();
    case RegionMatch::Prefix:
      return true;
    case RegionMatch::Indexed:  // one or more digits only after the name
      return region.size() > rule.name.size() &&
             std::all_of(region.begin() + static_cast<std::ptrdiff_t>(rule.name.size()),
                         region.end(), [](char c) { return c >= '0' && c <= '9'; });
  }
  return false;
}

}  // namespace

const char* memoryClassName(MemoryClass c) {
  switch (c) {
    case MemoryClass::Device:
      return "device";
    case MemoryClass::HostUncharged:
      return "host-uncharged";
    case MemoryClass::HostMixed:
      return "host-mixed";
    case MemoryClass::HostCharged:
      return "host-charged";
    case MemoryClass::Other:
      return "other";
    case MemoryClass::Unknown:
      return "unknown";
  }
  return "unknown";
}

const char* notCountedReason(MemoryClass c) {
  switch (c) {
    case MemoryClass::HostCharged:
      return "host-charged: shmem pages the cgroup's memory.current already holds";
    case MemoryClass::Other:
      return "other: not memory a workload grows (stolen, doorbell, gds and the like)";
    case MemoryClass::Unknown:
      return "unknown: a region of a driver tally has no class for; shown, never summed";
    case MemoryClass::Device:
    case MemoryClass::HostUncharged:
    case MemoryClass::HostMixed:
      break;
  }
  return nullptr;
}

MemoryClass classifyRegion(std::string_view driver, std::string_view region,
                           bool withDeviceRegions) {
  const DriverRow* row = findDriver(driver);
  if (!row) return MemoryClass::Unknown;
  for (const auto& rule : row->regions)
    if (matches(rule, region)) return withDeviceRegions ? rule.besideDeviceRegions : rule.cls;
  return MemoryClass::Unknown;
}

bool objectsUnchargedByMemcg(std::string_view driver) {
  const DriverRow* row = findDriver(driver);
  return row && row->objects == ObjectMemory::Ttm;
}

std::optional<std::uint64_t>& bytesOf(BytesByClass& b, MemoryClass c) {
  switch (c) {
    case MemoryClass::Device:
      return b.device;
    case MemoryClass::HostUncharged:
      return b.hostUncharged;
    case MemoryClass::HostMixed:
      return b.hostMixed;
    case MemoryClass::HostCharged:
      return b.hostCharged;
    case MemoryClass::Other:
      return b.other;
    case MemoryClass::Unknown:
      break;
  }
  return b.unknown;
}

DriverFigures driverFigures(std::string_view driver) {
  const DriverRow* row = findDriver(driver);
  return row ? row->figures : DriverFigures::Unknown;
}

}  // namespace tally::devices
