// A lease's GPU memory from the DRM clients it owns: the figure gpu_memory_max
// is compared with (docs/enforcement.md, "What counts"). Pure.
//
// Per region (gtt, vram), over the lease's owned clients (each DRM client once,
// by the fdinfo dedup rule):
//   lease = sum(resident) - sum(shared) + max(shared)
// A buffer shared between two clients of the lease (one exports, the other
// imports) sits in both clients' resident and shared figures; this counts the
// shared set once, as large as the largest client's shared set. It is exact
// when the lease's clients share the same buffers, a lower bound otherwise;
// never more than sum(resident) and never less than the largest client's
// resident. A kill is decided on it, so it errs low, never high.
// VRAM: when KFD (/sys/class/kfd/kfd/proc/<pid>/vram_*) reports more than the
// render-node fdinfo does (ROCm allocations fdinfo lacks), the KFD sum is used
// and the source says so.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "report/aggregate.h"

namespace tally::lease {

struct LeaseGpu {
  // gtt + vram; absent when some owned client printed a counted region
  // without a resident figure (the sum would be an undercount).
  std::optional<std::uint64_t> bytes;
  std::map<std::string, std::uint64_t>
      regions;                          // every region with a resident figure, by the rule above
  std::uint64_t sharedCountedOnce = 0;  // bytes the naive sum would have counted again
  std::string source;  // "drm-fdinfo", or "drm-fdinfo+kfd-sysfs" when KFD supplied VRAM
};

LeaseGpu leaseGpuUsage(const std::vector<report::RegionMap>& clients,
                       std::optional<std::uint64_t> kfdVramBytes);

}  // namespace tally::lease
