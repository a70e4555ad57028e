// The GPU memory of a set of DRM clients: the one figure a lease's meter,
// gpu_memory_max, budgets, headroom and `tally gpu`'s counted_bytes all use
// (docs/enforcement.md, "What counts"). Pure.
//
// Per region, over the clients (each DRM client once, by the fdinfo dedup
// rule):
//   region = sum(resident) - sum(shared) + max(shared)
// A buffer shared between two clients of the set (one exports, the other
// imports) sits in both clients' resident and shared figures; this counts the
// shared set once, as large as the largest client's shared set. It is exact
// when the clients share the same buffers, a lower bound otherwise; never
// more than sum(resident) and never less than the largest client's
// resident. A kill is decided on it, so it errs low, never high.
//
// The sum counts the regions whose memory class (devices/memory_class.h) is
// device or host-uncharged; host-charged bytes are already in memory.current,
// and other or unknown regions are shown, not summed.
// VRAM: when KFD (/sys/class/kfd/kfd/proc/<pid>/vram_*) reports more than
// the render-node fdinfo does (ROCm allocations fdinfo lacks), the KFD sum is
// used and the source says so.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "devices/memory_class.h"
#include "report/regions.h"

namespace tally::report {

struct GpuMemory {
  // Device + host-uncharged bytes; absent when some client printed a counted
  // region without a resident figure (the sum would be an undercount).
  std::optional<std::uint64_t> bytes;
  // The host-uncharged part of `bytes` (GTT and its kin): what the kernel
  // charges to memory.current once it charges GTT (the hand-over).
  std::uint64_t hostUncharged = 0;
  // Every region with a resident figure, by the rule above, counted or not.
  std::map<std::string, std::uint64_t> regions;
  std::map<std::string, devices::MemoryClass> classes;  // of every region seen
  std::uint64_t sharedCountedOnce = 0;  // bytes the naive sum would have counted again
  std::string source;  // "drm-fdinfo", or "drm-fdinfo+kfd-sysfs" when KFD supplied VRAM
  // Why `bytes` is absent, in words.
  std::optional<std::string> unknown;
};

GpuMemory countGpuMemory(const std::vector<const RegionMap*>& clients,
                         std::optional<std::uint64_t> kfdVramBytes);

}  // namespace tally::report
