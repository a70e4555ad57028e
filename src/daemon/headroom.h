// Measured headroom for one more grant in a pool (doctrine 5: it may only
// delay a grant). Pure: the figures come in, the headroom goes out.
//
//   host  = MemAvailable − Σ over the pool's holders of (memory_max − memory.current)
//   gpu   = min(Σ device (gtt_ceiling − gtt_used) + (vram_total − vram_used), MemAvailable)
//           − Σ over the pool's holders of (gpu_memory_max − GPU memory in use)
//
// gtt_ceiling is the pool's choice of the device's two GTT ceilings
// (devices/gtt_ceiling.h: the smaller of graphics and compute by default).
// A holder's unused declaration is still promised to it, so it is taken off
// what is free; a holder whose use is unknown keeps its whole declaration.
// Any figure that cannot be read makes that headroom absent (no delay).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "admission/engine.h"
#include "host/snapshot.h"

namespace tally::daemon {

struct HolderUse {
  std::optional<std::uint64_t> memoryMax, memoryInUse;
  std::optional<std::uint64_t> gpuMemoryMax, gpuInUse;
};

// The GPU memory free on the pool's devices (all devices with mem_info_*
// when the pool names none); absent when no such device exports the figures.
std::optional<std::uint64_t> deviceFree(const config::Pool& pool, const host::Snapshot& host);

// What the host and the pool's devices hold in all: MemTotal, and Σ over the
// pool's devices of (its GTT ceiling as the pool chooses + VRAM total); a
// device without both figures leaves the GPU total unknown.
admission::Totals poolTotals(const config::Pool& pool, const host::Snapshot& host);

admission::Headroom poolHeadroom(const config::Pool& pool, const host::Snapshot& host,
                                 const std::vector<HolderUse>& holders);

}  // namespace tally::daemon
