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
#include "coverage/handover.h"
#include "daemon/lease_book.h"
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

// The measured figures admission and the views judge pools on, from the
// leases' meters and the host snapshot.
class PoolMeasures {
 public:
  PoolMeasures(const LeaseBook& book, host::SnapshotCache& host, const coverage::Handover& handover)
      : book_(book), host_(host), handover_(handover) {}
  // What is free for one more grant in `pool`.
  admission::Headroom headroomFor(const config::Pool& pool);
  // What the host and the pool's devices hold in all.
  admission::Totals totalsFor(const config::Pool& pool) { return poolTotals(pool, host_.recent()); }
  // A lease's host memory without its GPU memory (coverage::Handover::hostOnly).
  std::optional<std::uint64_t> hostOnly(const Lease& l) const;
  // What a placed attach's workload holds now, read as a holder's in-use is
  // (its host memory without GPU memory, and its GPU memory): measured
  // headroom needs only the rest of its declaration (admission::Request).
  void noteHeld(const fs::Root& proc, const fs::Root& sys, Lease& l) const;

 private:
  const LeaseBook& book_;
  host::SnapshotCache& host_;
  const coverage::Handover& handover_;
};

}  // namespace tally::daemon
