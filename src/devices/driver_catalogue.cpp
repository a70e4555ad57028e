#include "devices/driver_catalogue.h"

#include <array>

namespace tally::devices {
namespace {

using M = MemoryClass;

// A region whose class does not depend on the client's other regions.
constexpr RegionRule same(std::string_view name, RegionMatch match, MemoryClass cls) {
  return {name, match, cls, cls};
}

// amdgpu's regions (amdgpu_show_fdinfo), and the VM test driver's as itself.
constexpr std::array kAmdgpuRegions = {
    same("vram", RegionMatch::Exact, M::Device),
    same("gtt", RegionMatch::Exact, M::HostUncharged),
    same("cpu", RegionMatch::Exact, M::HostUncharged),
    same("gds", RegionMatch::Exact, M::Other),
    same("gws", RegionMatch::Exact, M::Other),
    same("oa", RegionMatch::Exact, M::Other),
    same("doorbell", RegionMatch::Exact, M::Other),
    same("mmioremap", RegionMatch::Exact, M::Other),
};

// xe's TTM placements: vram0.. on the device, gtt and system in system RAM.
constexpr std::array kXeRegions = {
    same("vram", RegionMatch::Indexed, M::Device),
    same("gtt", RegionMatch::Exact, M::HostUncharged),
    same("system", RegionMatch::Exact, M::HostUncharged),
    same("stolen", RegionMatch::Exact, M::Other),
};

// i915's intel_memory_region names: system0 is shmem on an integrated part;
// on a discrete one (local* printed too) its LMEM|SMEM objects placed or
// evicted to system use TTM pool pages (i915_gem_ttm_system_setup).
constexpr std::array kI915Regions = {
    same("local", RegionMatch::Indexed, M::Device),
    RegionRule{"system", RegionMatch::Indexed, M::HostCharged, M::HostMixed},
    same("stolen-", RegionMatch::Prefix, M::Other),
};

// drm_show_memory_stats' single region of the shmem-helper drivers: pages
// charged to the memory cgroup of the task that faults them in.
constexpr std::array kShmemRegions = {same("memory", RegionMatch::Exact, M::HostCharged)};

constexpr DriverRow shmemDriver(std::string_view driver) {
  return {.driver = driver,
          .regions = kShmemRegions,
          .figures = DriverFigures::Printed,
          .objects = ObjectMemory::Shmem};
}

// nouveau, virtio_gpu and vmwgfx print no drm-*-memory key (debugfs only;
// KERNEL-FACTS §10): their clients' GPU memory is unknown, never 0. radeon's
// figures are not established (Unknown), though its objects are TTM's.
constexpr std::array kCatalogue = {
    DriverRow{.driver = "amdgpu",
              .regions = kAmdgpuRegions,
              .figures = DriverFigures::Printed,
              .objects = ObjectMemory::Ttm,
              .decoder = TALLY_DEVICE_AMDGPU,
              .allocationIoctls = "GEM_CREATE",
              .kfd = true,
              .gttProbe = GttProbe::AmdgpuGem},
    DriverRow{.driver = "xe",
              .regions = kXeRegions,
              .figures = DriverFigures::Printed,
              .objects = ObjectMemory::Ttm,
              .decoder = TALLY_DEVICE_XE,
              .allocationIoctls = "GEM_CREATE"},
    DriverRow{.driver = "i915",
              .regions = kI915Regions,
              .figures = DriverFigures::Printed,
              .objects = ObjectMemory::ShmemOrTtm},
    DriverRow{.driver = "radeon", .objects = ObjectMemory::Ttm},
    DriverRow{.driver = "nouveau", .figures = DriverFigures::None, .objects = ObjectMemory::Ttm},
    DriverRow{.driver = "virtio_gpu", .figures = DriverFigures::None},
    DriverRow{.driver = "vmwgfx", .figures = DriverFigures::None},
    shmemDriver("msm"),
    shmemDriver("v3d"),
    shmemDriver("panfrost"),
    shmemDriver("panthor"),
    shmemDriver("lima"),
    shmemDriver("etnaviv"),
    shmemDriver("amdxdna_accel_driver"),  // the amdxdna NPU
    shmemDriver("intel_vpu"),             // ivpu's fdinfo memory since late 2025
    // tally's VM test driver as itself: amdgpu-shaped (gtt and vram), its own
    // CREATE decoded. Playing another driver (its `personality`), it prints
    // that driver's name and is that driver's row.
    DriverRow{.driver = "tally_testdrm",
              .regions = kAmdgpuRegions,
              .figures = DriverFigures::Printed,
              .objects = ObjectMemory::Ttm,
              .decoder = TALLY_DEVICE_TESTDRM,
              .allocationIoctls = "its CREATE",
              .gttProbe = GttProbe::TestDrm,
              .testDriver = true},
};

}  // namespace

std::span<const DriverRow> driverCatalogue() { return kCatalogue; }

const DriverRow* findDriver(std::string_view driver) {
  for (const auto& row : kCatalogue)
    if (row.driver == driver) return &row;
  return nullptr;
}

const DriverRow* rowDecodedAs(std::uint32_t kind) {
  if (kind == TALLY_DEVICE_OTHER_DRM) return nullptr;
  for (const auto& row : kCatalogue)
    if (static_cast<std::uint32_t>(row.decoder) == kind) return &row;
  return nullptr;
}

std::string_view decodedDriverName(std::uint32_t kind) {
  if (kind == TALLY_DEVICE_KFD) return "kfd";
  const DriverRow* row = rowDecodedAs(kind);
  return row ? row->driver : std::string_view();
}

bool servedByKfd(std::string_view driver) {
  const DriverRow* row = findDriver(driver);
  return row && row->kfd;
}

std::string chargedDriverNames(std::string_view separator, bool undecodedOnly) {
  std::string out;
  for (const auto& row : kCatalogue) {
    if (row.testDriver || row.objects != ObjectMemory::Ttm) continue;
    if (undecodedOnly && row.decoder != TALLY_DEVICE_OTHER_DRM) continue;
    if (!out.empty()) out += separator;
    out += row.driver;
  }
  return out;
}

}  // namespace tally::devices
