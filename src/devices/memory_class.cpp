#include "devices/memory_class.h"

#include <algorithm>
#include <array>

namespace tally::devices {
namespace {

// `prefix` followed by one or more digits only (xe's vram0, i915's local1).
bool indexed(std::string_view region, std::string_view prefix) {
  if (region.substr(0, prefix.size()) != prefix || region.size() == prefix.size()) return false;
  return std::all_of(region.begin() + static_cast<std::ptrdiff_t>(prefix.size()), region.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

bool startsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

bool oneOf(std::string_view s, std::initializer_list<std::string_view> names) {
  return std::find(names.begin(), names.end(), s) != names.end();
}

// Drivers whose GEM objects are shmem-backed and print drm_show_memory_stats'
// single `memory` region: those pages are charged to the memory cgroup of the
// task that faults them in (drm_gem_shmem_helper; ivpu's fdinfo memory since
// late 2025).
constexpr std::array<std::string_view, 8> kShmemDrivers = {
    "msm", "v3d", "panfrost", "panthor", "lima", "etnaviv", "amdxdna_accel_driver", "intel_vpu"};

// Drivers that print no memory figure in fdinfo (KERNEL-FACTS §10).
constexpr std::array<std::string_view, 3> kNoFigureDrivers = {"nouveau", "virtio_gpu", "vmwgfx"};

bool in(std::string_view s, const auto& list) {
  return std::find(list.begin(), list.end(), s) != list.end();
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
  if (driver == "amdgpu" || driver == "tally_testdrm") {
    if (region == "vram") return MemoryClass::Device;
    if (oneOf(region, {"gtt", "cpu"})) return MemoryClass::HostUncharged;
    if (oneOf(region, {"gds", "gws", "oa", "doorbell", "mmioremap"})) return MemoryClass::Other;
    return MemoryClass::Unknown;
  }
  if (driver == "xe") {
    if (indexed(region, "vram")) return MemoryClass::Device;
    if (oneOf(region, {"gtt", "system"})) return MemoryClass::HostUncharged;
    if (region == "stolen") return MemoryClass::Other;
    return MemoryClass::Unknown;
  }
  if (driver == "i915") {
    if (indexed(region, "local")) return MemoryClass::Device;
    if (indexed(region, "system"))
      return withDeviceRegions ? MemoryClass::HostMixed : MemoryClass::HostCharged;
    if (startsWith(region, "stolen-")) return MemoryClass::Other;
    return MemoryClass::Unknown;
  }
  if (in(driver, kShmemDrivers))
    return region == "memory" ? MemoryClass::HostCharged : MemoryClass::Unknown;
  return MemoryClass::Unknown;
}

bool objectsUnchargedByMemcg(std::string_view driver) {
  return oneOf(driver, {"amdgpu", "tally_testdrm", "xe", "radeon", "nouveau"});
}

DriverFigures driverFigures(std::string_view driver) {
  if (in(driver, kNoFigureDrivers)) return DriverFigures::None;
  if (oneOf(driver, {"amdgpu", "tally_testdrm", "xe", "i915"}) || in(driver, kShmemDrivers))
    return DriverFigures::Printed;
  return DriverFigures::Unknown;
}

}  // namespace tally::devices
