// The KernelCharge (bpf/kernel_charge.h) over the kernel charge's maps:
// arming, retiring and reaping leases, reading their charges, the totals and
// the refusals' ring buffer, registering devices. Whoever loaded the
// programs or opened their pins (bpf/kernel_charge_bpf.cpp) hands it the maps.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "bpf/kernel_charge.h"
#include "bpf/sizing.h"
#include "util/result.h"
#include "util/unique_fd.h"

struct tally_gpu_charge;  // the generated skeleton's (gpu_charge.skel.h)

namespace tally::bpf {

// The kernel's dev_t, as inode->i_rdev and device->devt hold it.
inline std::uint32_t kernelDev(std::uint32_t major, std::uint32_t minor) {
  return (major << 20) | (minor & 0xfffff);
}

// Every map by fd, and the tracing programs' ids (for their recursion misses).
struct ChargeMaps {
  int leases = -1, charges = -1, totals = -1, state = -1, devices = -1, refusals = -1;
  std::vector<std::uint32_t> tracingProgs;
};

// The charge over `maps`: the skeleton's (this process loaded the programs;
// the charge owns `skel` and destroys it, also when this fails), or the
// pinned ones another process loaded (`skel` null, `owned` their fds).
// Fails when the refusals' ring buffer cannot be read.
Result<std::unique_ptr<KernelCharge>> chargeOverMaps(tally_gpu_charge* skel, ChargeMaps maps,
                                                     std::vector<UniqueFd> owned, Capabilities can,
                                                     Sizing room);

}  // namespace tally::bpf
