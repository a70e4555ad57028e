#include "devices/memory_class.h"

#include <algorithm>
#include <array>

namespace tally::devices {
namespace {

// "vram" followed by digits only (xe's vram0, vram1), or the bare prefix when
// `bare` is allowed.
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
// task that faults them in.
constexpr std::array<std::string_view, 5> kShmemDrivers = {"msm", "v3d", "panfrost", "lima",
                                                           "amdxdna_accel_driver"};

}  // namespace

const char* memoryClassName(MemoryClass c) {
  switch (c) {
    case MemoryClass::Device:
      return "device";
    case MemoryClass::HostUncharged:
      return "host-uncharged";
    case MemoryClass::HostCharged:
      return "host-charged";
    case MemoryClass::Other:
      return "other";
    case MemoryClass::Unknown:
      return "unknown";
  }
  return "unknown";
}

MemoryClass classifyRegion(std::string_view driver, std::string_view region) {
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
    if (indexed(region, "system")) return MemoryClass::HostCharged;
    if (startsWith(region, "stolen-")) return MemoryClass::Other;
    return MemoryClass::Unknown;
  }
  if (std::find(kShmemDrivers.begin(), kShmemDrivers.end(), driver) != kShmemDrivers.end())
    return region == "memory" ? MemoryClass::HostCharged : MemoryClass::Unknown;
  return MemoryClass::Unknown;
}

}  // namespace tally::devices
