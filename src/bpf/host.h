// What the kernel charge needs to know of this host: the facts
// availability.h judges, the GPU devices to register and their memory.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "bpf/availability.h"
#include "bpf/kernel_charge.h"
#include "fs/root.h"

namespace tally::bpf {

// The facts availability.h judges, read from this host: `sys` is /sys.
HostFacts readHostFacts(const fs::Root& sys);

// The devices to register, from the host's DRM devices (the driver each
// one's DRM_IOCTL_VERSION names) and /dev/kfd.
std::vector<DeviceRule> discoverDeviceRules(const fs::Root& sys);

// Σ GTT + VRAM totals of the host's DRM devices (mem_info_*_total); absent
// when no device exports them.
std::optional<std::uint64_t> hostGpuMemory(const fs::Root& sys);

}  // namespace tally::bpf
