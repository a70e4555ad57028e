// DRM devices as sysfs shows them: which nodes (card*, renderD* on the DRM
// major; accel* on the compute-accelerator major, e.g. the Strix Halo NPU)
// belong to which device, the device's driver and PCI address, and the
// amdgpu memory counters (mem_info_*), all read relative to the sys root.
// Accel devices are DRM devices to the kernel (drivers/accel is built on the
// DRM core) and print the same drm-* fdinfo keys.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fs/root.h"

namespace tally::devices {

inline constexpr std::uint32_t kDrmMajor = 226;    // DRM_MAJOR, include/drm/drm_ioctl.h
inline constexpr std::uint32_t kAccelMajor = 261;  // ACCEL_MAJOR, include/drm/drm_accel.h

struct DrmNode {
  std::uint32_t major = kDrmMajor;
  std::uint32_t minor = 0;
  std::string name;  // card0, renderD128, accel0
  bool isRender() const { return major == kDrmMajor && minor >= 128; }
};

// One device memory region's sysfs figures (bytes). Absent = not exported.
struct DeviceMemory {
  std::string region;  // "gtt", "vram", "vis_vram"
  std::optional<std::uint64_t> totalBytes;
  std::optional<std::uint64_t> usedBytes;
};

struct DrmDevice {
  // Stable identity: the PCI BDF for PCI devices (equal to fdinfo's
  // drm-pdev), else the basename of the node's `device` link (e.g. "vgem").
  std::string key;
  std::optional<std::string> pdev;   // set only for PCI devices
  std::string driver;                // basename of device/driver; empty if unbound
  std::vector<DrmNode> nodes;        // sorted by (major, minor)
  std::vector<DeviceMemory> memory;  // regions whose mem_info_* files exist

  const DeviceMemory* region(std::string_view name) const;
  // total - used of one region (0 when used exceeds total), absent when the
  // device does not export both figures.
  std::optional<std::uint64_t> regionFree(std::string_view name) const;
};

struct DeviceMap {
  std::vector<DrmDevice> devices;  // sorted by key
  // Index into `devices`, or nullopt if no device has that node.
  std::optional<std::size_t> byNode(std::uint32_t major, std::uint32_t minor) const;
  const DrmDevice* byKey(std::string_view key) const;
};

// Every DRM device under <sys>/class/drm and <sys>/class/accel. An absent
// class directory (no DRM core loaded, the case on a GPU-less host) gives an
// empty map, not an error.
Result<DeviceMap> discoverDrmDevices(const fs::Root& sys);

// A node seen in an fd but missing from the map (hot-plugged since
// discovery): resolve it through <sys>/dev/char/<major>:<minor> and add it.
std::optional<std::size_t> resolveNode(const fs::Root& sys, DeviceMap& map, std::uint32_t major,
                                       std::uint32_t minor);

}  // namespace tally::devices
