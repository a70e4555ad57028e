// What a DRM memory region's bytes are, by the driver that printed them
// (docs/gpu.md, "Memory classes"). A region name alone does not say it:
// i915's system0 is shmem (already in the cgroup's memory.current), xe's
// system is TTM pages (not); amdgpu's gtt is system RAM, xe's vram0 is not.
//
//   device          memory on the device: amdgpu vram, xe vram0.., i915 local0..
//   host-uncharged  TTM pages in system RAM, not charged to the memory cgroup:
//                   amdgpu gtt, cpu; xe gtt, system
//   host-charged    shmem pages, already in memory.current: i915 system0..;
//                   msm, v3d, panfrost, lima and the amdxdna NPU's `memory`
//   other           not memory a workload grows: stolen*, gds, gws, oa,
//                   doorbell, mmioremap
//   unknown         a (driver, region) pair not in the table
//
// tally_testdrm, the VM harness's test driver (vm/testdrm), names its regions
// after the driver it plays (its `personality` parameter) and is classed as
// that driver; as itself it is amdgpu-shaped: gtt and vram.
//
// GPU memory (the lease meter, gpu_memory_max, budgets, headroom) counts
// device + host-uncharged: host-charged bytes are already in the host
// figure, and unknown ones are shown, never guessed into a sum. Pure.
#pragma once

#include <string_view>

namespace tally::devices {

enum class MemoryClass { Device, HostUncharged, HostCharged, Other, Unknown };

// "device", "host-uncharged", "host-charged", "other", "unknown".
const char* memoryClassName(MemoryClass c);

// `driver` as fdinfo's drm-driver prints it ("amdgpu", "xe", "i915", "v3d",
// "amdxdna_accel_driver", ...); `region` as in drm-total-<region>.
MemoryClass classifyRegion(std::string_view driver, std::string_view region);

// Whether GPU memory figures count the class: device and host-uncharged.
inline bool countedAsGpuMemory(MemoryClass c) {
  return c == MemoryClass::Device || c == MemoryClass::HostUncharged;
}

}  // namespace tally::devices
