// One coverage assessment of this host: the static signs, the active probe
// when asked for, and the verdict. Shared by `tally doctor` and the daemon's
// start-up check (the hand-over, docs/coverage.md).
#pragma once

#include <optional>
#include <string>

#include "coverage/active_probe.h"
#include "coverage/coverage.h"
#include "devices/drm_devices.h"
#include "fs/root.h"

namespace tally::coverage {

struct Assessment {
  std::string kernel;
  StaticSigns signs;
  std::optional<ProbeResult> probe;
  CoverageVerdict verdict;
  bool gpuPresent =
      false;  // a DRM device whose driver has GTT (an mem_info_gtt_* file, or a probe)
};

// `statCgroup`: a non-root cgroup whose memory.stat shows gpu_active when
// the kernel has memcg GPU counters (tally's own cgroup). `probe`: run the
// active probe with these options; nullopt: static signs only.
Assessment assess(const fs::Root& proc, const fs::Root& sys, const fs::Root* cgroupRoot,
                  const devices::DeviceMap& devices, const std::string& kernel,
                  const std::string& statCgroup, const std::optional<ProbeOptions>& probe);

// tally's own cgroup v2 path from /proc/self/cgroup ("/" when unknown).
std::string ownCgroup(const fs::Root& proc);

}  // namespace tally::coverage
