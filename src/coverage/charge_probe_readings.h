// The charge probe's readings of the driver's own figures: a client's
// fdinfo and a device's mem_info_*_used, before and after an allocation,
// and their deltas as Figures. Internal to the probe (charge_probe.cpp).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "coverage/charge_probe.h"
#include "fs/root.h"

namespace tally::coverage::charge_probe {

// The client's fdinfo: per region, its total (drm-total-, or drm-memory- where
// amdgpu printed only that before 6.5, or drm-resident-), bytes.
struct FdinfoReading {
  std::map<std::string, std::pair<std::uint64_t, std::string>> regions;  // region -> bytes, key
  std::string absent;
};
FdinfoReading readFdinfo(const fs::Root& proc, pid_t pid, int fd);
Figure fdinfoDelta(const FdinfoReading& before, const FdinfoReading& after);

// A device's mem_info_gtt_used + mem_info_vram_used (device-wide).
struct MemInfoReading {
  std::optional<std::uint64_t> used;
  std::string source, absent;
};
MemInfoReading readMemInfo(const fs::Root& sys, const std::string& sysNode);
Figure memInfoDelta(const MemInfoReading& before, const MemInfoReading& after);

}  // namespace tally::coverage::charge_probe
