// What a DRM memory region's bytes are, by the driver that printed them
// (docs/gpu.md, "Memory classes"). A region name alone does not say it:
// i915's system0 is shmem (already in the cgroup's memory.current) on an
// integrated part and partly TTM pages on a discrete one; xe's system is TTM
// pages (not charged); amdgpu's gtt is system RAM, xe's vram0 is not.
//
//   device          memory on the device: amdgpu vram, xe vram0.., i915 local0..
//   host-uncharged  TTM pages in system RAM, not charged to the memory cgroup:
//                   amdgpu gtt, cpu; xe gtt, system
//   host-mixed      i915's system0.. on a discrete part (the client also prints
//                   local* regions): smem-only cached objects are shmem
//                   (charged), LMEM|SMEM objects placed or evicted to system
//                   use TTM pool pages (not charged; i915_gem_ttm_system_setup).
//                   Counted as GPU memory (the bound and budgets see it) and
//                   flagged: part of it may be in memory.current as well.
//   host-charged    shmem pages, already in memory.current: i915 system0.. on an
//                   integrated part; the `memory` region of msm, v3d, panfrost,
//                   panthor, lima, etnaviv, the amdxdna NPU and intel_vpu
//   other           not memory a workload grows: stolen*, gds, gws, oa,
//                   doorbell, mmioremap
//   unknown         a (driver, region) pair not in the driver catalogue
//                   (driver_catalogue.h, whose rows hold every driver's regions)
//
// tally_testdrm, the VM harness's test driver (vm/testdrm), names its regions
// after the driver it plays (its `personality` parameter) and is classed as
// that driver; as itself it is amdgpu-shaped: gtt and vram.
//
// GPU memory (the lease meter, gpu_memory_max, budgets, headroom) counts
// device, host-uncharged and host-mixed: host-charged bytes are already in
// the host figure, and unknown ones are shown, never guessed into a sum. Pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace tally::devices {

enum class MemoryClass { Device, HostUncharged, HostMixed, HostCharged, Other, Unknown };

// "device", "host-uncharged", "host-mixed", "host-charged", "other", "unknown".
const char* memoryClassName(MemoryClass c);

// `driver` as fdinfo's drm-driver prints it ("amdgpu", "xe", "i915", "v3d",
// "amdxdna_accel_driver", ...); `region` as in drm-total-<region>;
// `withDeviceRegions`: the same client also printed a device-memory region
// (i915's local*: a discrete part, where system0 is host-mixed).
MemoryClass classifyRegion(std::string_view driver, std::string_view region,
                           bool withDeviceRegions = false);

// Whether GPU memory figures count the class: device, host-uncharged and
// host-mixed.
inline bool countedAsGpuMemory(MemoryClass c) {
  return c == MemoryClass::Device || c == MemoryClass::HostUncharged || c == MemoryClass::HostMixed;
}
// Why a class is not counted as GPU memory, as a reader is told beside the
// region's bytes; nullptr for a counted class.
const char* notCountedReason(MemoryClass c);

// Whether the buffer objects a driver creates are memory the memory cgroup
// does not charge, so the kernel charge (bpf/) counts them: the TTM
// drivers of the catalogue (ObjectMemory::Ttm: amdgpu, xe, radeon, nouveau;
// tally_testdrm as amdgpu). Not the shmem drivers (charged already) nor
// i915, whose objects are shmem on an integrated part (on a discrete one
// only the fdinfo meter sees its TTM pages), nor a driver not in it.
bool objectsUnchargedByMemcg(std::string_view driver);

// Whether a driver's fdinfo carries memory figures at all (its catalogue
// row). DRM_GEM_FOPS sets no show_fdinfo, and nouveau, virtio_gpu and vmwgfx
// (debugfs only) print no drm-*-memory key: their clients' GPU memory is
// unknown, never 0 (KERNEL-FACTS §10).
enum class DriverFigures { Printed, None, Unknown };
DriverFigures driverFigures(std::string_view driver);

// Bytes by memory class (fdinfo's regions summed by their class): what a
// stored sample holds, whichever driver's region names they came from. A
// class no region of was read is absent, never 0.
struct BytesByClass {
  std::optional<std::uint64_t> device{};
  std::optional<std::uint64_t> hostUncharged{};
  std::optional<std::uint64_t> hostMixed{};
  std::optional<std::uint64_t> hostCharged{};
  std::optional<std::uint64_t> other{};
  std::optional<std::uint64_t> unknown{};
  bool operator==(const BytesByClass&) const = default;
};
std::optional<std::uint64_t>& bytesOf(BytesByClass& b, MemoryClass c);

}  // namespace tally::devices
