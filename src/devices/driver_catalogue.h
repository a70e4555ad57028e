// What tally knows of each DRM driver, one row per driver (docs/gpu.md,
// "Memory classes"): its fdinfo regions' memory classes, whether its fdinfo
// prints memory figures, what memory its buffer objects are (so whether the
// memory cgroup or the kernel charge counts them), which allocation
// decoder the kernel charge runs on its nodes, and the facts doctor, the
// report and the coverage probes print or try for it. The classifier
// (memory_class.h), the BPF loader (bpf/host.cpp), doctor, the report and the
// probes read these rows and nothing else of a driver's name.
//
// Adding a driver is a row in driver_catalogue.cpp; a driver whose
// allocations the kernel charge decodes also needs its kind
// (devices/device_kind.h) and decoder (bpf/gpu_ioctl.h), and tests. Pure.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "devices/device_kind.h"
#include "devices/memory_class.h"

namespace tally::devices {

// How a region rule's name matches drm-total-<region>'s.
enum class RegionMatch {
  Exact,    // "vram" is vram only
  Indexed,  // the name and one or more digits: xe's vram0, i915's local1
  Prefix,   // the name and anything: i915's stolen-system0
};

// One region name's class. `besideDeviceRegions` is its class when the same
// client also printed a device-memory region (i915's system0 on a discrete
// part is host-mixed, host-charged on an integrated one).
struct RegionRule {
  std::string_view name{};
  RegionMatch match = RegionMatch::Exact;
  MemoryClass cls = MemoryClass::Unknown;
  MemoryClass besideDeviceRegions = MemoryClass::Unknown;
};

// What memory a driver's GEM objects are.
enum class ObjectMemory {
  Unknown,     // not established: neither charge counts them as the driver's
  Shmem,       // shmem pages the memory cgroup charges (a lease's MemoryMax bounds them)
  Ttm,         // TTM pages memcg does not charge: the kernel charge (bpf/) counts them
  ShmemOrTtm,  // i915: shmem on an integrated part, TTM pages on a discrete one
};

// How the coverage probe (coverage/active_probe.cpp) makes a GTT buffer on
// the driver's render node, if it can.
enum class GttProbe { None, AmdgpuGem, TestDrm };

struct DriverRow {
  std::string_view driver{};  // as fdinfo's drm-driver and DRM_IOCTL_VERSION print it
  std::span<const RegionRule> regions{};
  DriverFigures figures = DriverFigures::Unknown;  // whether its fdinfo prints memory figures
  ObjectMemory objects = ObjectMemory::Unknown;
  // The allocation decoder the kernel charge runs on its nodes;
  // TALLY_DEVICE_OTHER_DRM: none (its objects are still charged when TTM).
  tally_device_kind decoder = TALLY_DEVICE_OTHER_DRM;
  std::string_view allocationIoctls{};  // what the decoder reads, as doctor names it
  bool kfd = false;  // ROCm's KFD allocates on its devices: a compute ceiling, a ROCm placement
  GttProbe gttProbe = GttProbe::None;
  bool testDriver = false;  // tally's VM test driver (vm/testdrm): never named as a real driver
};

// Every row, in the catalogue's order.
std::span<const DriverRow> driverCatalogue();

// The row of `driver` (fdinfo's drm-driver), nullptr for a driver not in it.
const DriverRow* findDriver(std::string_view driver);

// The row whose decoder is `kind` (a bpf::DeviceRule's), nullptr for none
// (TALLY_DEVICE_OTHER_DRM, TALLY_DEVICE_KFD: KFD is no DRM driver).
const DriverRow* rowDecodedAs(std::uint32_t kind);

// The driver a registered device kind decodes allocations for (what doctor
// and the charge probe call a device registered as it): its row's driver,
// "kfd" for KFD's node; empty for a kind that decodes nothing.
std::string_view decodedDriverName(std::uint32_t kind);

// Whether ROCm's KFD allocates on a device of `driver` (amdgpu's compute
// ceiling and ROCm placement are reported for it).
bool servedByKfd(std::string_view driver);

// The real drivers (not the test driver) whose objects the kernel charge
// counts, joined by `separator` in the catalogue's order; `undecodedOnly`:
// only those whose allocations it does not decode ("radeon/nouveau").
std::string chargedDriverNames(std::string_view separator, bool undecodedOnly);

}  // namespace tally::devices
