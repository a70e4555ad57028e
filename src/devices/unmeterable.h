// Devices a gpu_memory_max cannot be checked on: their driver prints no
// memory figure in fdinfo (devices::driverFigures), so a lease's GPU memory
// there would be unknown for its whole life and its bound would never fire.
// Such a lease is refused at start (fail closed), with the device named.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "devices/drm_devices.h"

namespace tally::devices {

// The devices of `map` whose driver prints no memory figure, among those
// named in `scope` (PCI addresses, as a pool's `devices`; empty: every device).
std::vector<const DrmDevice*> unmeterableDevices(const DeviceMap& map,
                                                 const std::vector<std::string>& scope);

// Why a lease declaring gpu_memory_max on `scope` must not start, or nothing.
std::optional<std::string> gpuBoundRefusal(const DeviceMap& map,
                                           const std::vector<std::string>& scope);

}  // namespace tally::devices
