// What the host says beside its processes, read in one go: MemTotal and
// MemAvailable, the kernel release, the DRM devices with their sysfs
// figures, the TTM modules, amdgpu's parameters, KFD's limits and its
// process index, the page size. The daemon reads one per sampler tick (its
// meters, headroom and views all use that one); `tally gpu`, `doctor` and
// `config check` read one per command. Nothing downstream reads these files
// again (oomd's one context per tick).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "devices/drm_devices.h"
#include "devices/gtt_ceiling.h"
#include "devices/ttm.h"
#include "fs/root.h"
#include "probes/kernel_release.h"
#include "probes/meminfo.h"
#include "scanner/kfd.h"

namespace tally::host {

struct Snapshot {
  std::uint64_t readAtUs = 0;  // CLOCK_MONOTONIC when it was read
  probes::MemInfo meminfo;
  std::optional<std::string> meminfoError;
  std::optional<probes::KernelRelease> kernel;
  std::optional<std::string> kernelError;
  devices::DeviceMap devices;
  std::optional<std::string> devicesError;
  devices::TtmModules ttm;
  devices::AmdgpuParams amdgpu;
  devices::KfdLimits kfdLimits;  // from the kernel, MemTotal, ttm and amdgpu above
  scanner::KfdIndex kfd;
  std::uint64_t pageSize = 4096;  // what TTM's pages_limit counts in

  devices::GttCeilings ceilings(const devices::DrmDevice& d) const {
    return devices::gttCeilings(d, ttm, kfdLimits);
  }
  devices::RocmPlacement rocm(const devices::DrmDevice& d) const {
    return devices::rocmPlacement(d, kernel);
  }
};

// `pageSize` 0: the running kernel's (sysconf), the unit of pages_limit.
Snapshot readSnapshot(const fs::Root& proc, const fs::Root& sys, std::uint64_t pageSize = 0);

// The daemon's one snapshot: read fresh at each sampler tick, and between
// ticks reused while it is at most 100 ms old however many requests ask.
class SnapshotCache {
 public:
  SnapshotCache(const fs::Root& proc, const fs::Root& sys, std::uint64_t pageSize)
      : proc_(proc), sys_(sys), pageSize_(pageSize) {}
  Snapshot& fresh();
  const Snapshot& recent();

 private:
  const fs::Root& proc_;
  const fs::Root& sys_;
  std::uint64_t pageSize_;
  std::optional<Snapshot> last_;
};

}  // namespace tally::host
