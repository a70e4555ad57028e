// The daemon's record of one lease and its host-figure cache: private to the
// service (daemon/service.cpp, daemon/service_views.cpp).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/headroom.h"
#include "daemon/service.h"
#include "lease/attributes.h"

namespace tally::daemon {

struct Service::Lease {
  enum class State { Queued, Granted, Running };
  std::string id, name, kind;  // kind: "run" or "attach"
  uid_t owner = 0;
  pid_t peerPid = 0;
  admission::Request req;
  State state = State::Queued;
  std::uint64_t conn = 0;  // the client bound to the lease; 0 = none
  bool pending = false;    // an acquire/attach waits for its reply on `conn`
  json pendingId;
  json target;  // attach: {"unit":...} | {"cgroup":...} | {"pid":...}
  std::string unit, cgroup, countersCgroup;
  std::uint64_t inode = 0;
  std::unique_ptr<lease::LeaseMeter> meter;
  std::optional<contain::AppliedLimits> applied;
  std::optional<std::uint64_t> oomKillsAtAdoption;
  std::uint64_t requestedAtNs = 0, grantedAtNs = 0, startedAtNs = 0;
  std::uint64_t graceDeadlineUs = 0;  // a run lease without its client is closed as lost after this
  std::uint64_t killDeadlineUs = 0;   // release of a run lease: SIGKILL the rest after this
  bool releaseRequested = false;
  std::optional<std::size_t> lastPosition;
  bool recovered = false;
  // The GPU bound: enforced here for attached leases; a run lease's client
  // enforces it and reports what happened ("bound").
  enforce::GpuBound bound;
  enforce::GpuBoundState boundState;
  std::vector<enforce::BoundEvent> boundEvents;
  std::optional<std::string> tallyKill;
  bool advisory = false;  // the kernel charges GTT: gpu_memory_max reports only
  lease::Attributes attributes;  // operator-declared (--attr), shown in seat rows as "declared"
  // Bound events a run lease's client may still report now (a token bucket:
  // Limits::boundBurst, one more per Limits::boundRefillUs), and how many
  // were refused over it.
  double boundTokens = 0;
  std::uint64_t boundRefillAtUs = 0;
  std::uint64_t boundRefused = 0;
};

struct Service::HostCache {
  std::uint64_t readAtUs = 0;
  HostFigures figures;
};

}  // namespace tally::daemon
