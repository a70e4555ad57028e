// The active GTT -> memcg probe: in a throw-away child cgroup, a child process
// allocates and touches a GTT buffer through the device's own driver, and the
// parent compares the cgroup's memory.current delta with the client's
// drm-total-gtt delta (coverage::judgeProbe). Drivers with a probe: amdgpu (a
// GEM buffer in the GTT domain through its ioctls, CPU-mapped and written) and
// tally's VM test driver (vm/testdrm); any other: "no probe for this driver".
// Needs root: it creates a cgroup under `cgroupParent` and moves the child in.
#pragma once

#include <cstdint>
#include <string>

#include "coverage/coverage.h"
#include "devices/drm_devices.h"
#include "fs/root.h"

namespace tally::coverage {

struct ProbeOptions {
  std::uint64_t bytes = 64ULL << 20;
  std::string cgroupParent = "/";   // must have +memory in its cgroup.subtree_control
  std::string devDir = "/dev/dri";  // where render nodes live
  int stepTimeoutMs = 10'000;       // per step of the child
};

// Drivers the probe knows how to make a GTT buffer on (their catalogue row's
// gttProbe, devices/driver_catalogue.h).
bool hasProbe(const std::string& driver);
// The driver a device's probe would use ("tally_testdrm" for the VM driver's driverless platform
// device).
std::string probeDriver(const devices::DrmDevice& d);

ProbeResult runActiveProbe(const fs::Root& proc, const fs::Root& cgroupRoot,
                           const devices::DeviceMap& devices, const std::string& kernel,
                           const ProbeOptions& options);

}  // namespace tally::coverage
