// One lease as the daemon holds it: passive data. The LeaseBook owns every
// Lease; the other parts of the daemon read and change them through it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "admission/engine.h"
#include "cgroup/cgroup.h"
#include "cgroup/limits.h"
#include "daemon/limits.h"
#include "enforce/cadence.h"
#include "enforce/gpu_bound.h"
#include "lease/attributes.h"
#include "lease/kind.h"
#include "lease/meter.h"
#include "util/token_bucket.h"

namespace tally::daemon {

struct Lease {
  enum class State { Queued, Granted, Running };

  std::string id, name;
  lease::LeaseKind kind = lease::LeaseKind::Run;
  uid_t owner = 0;
  pid_t peerPid = 0;
  admission::Request req;
  State state = State::Queued;
  std::uint64_t conn = 0;  // the client bound to the lease; 0 = none
  bool pending = false;    // an acquire/attach waits for its reply on `conn`
  nlohmann::json pendingId;
  // attach: what the operator named (on the heap: only attach leases have one).
  std::unique_ptr<lease::AttachTarget> target;
  lease::Attributes attributes;  // operator-declared (--attr), shown in seat rows as "declared"
  std::uint64_t requestedAtNs = 0, grantedAtNs = 0, startedAtNs = 0;

  // Where it runs, once it runs. The cgroups are held open (a re-created
  // cgroup of the same name is never read as this one): `cg` is the lease's,
  // `countersCg` where its final counters live (the same, or its slice). On
  // the heap: a queued request has neither, and 10,000 of them waiting
  // should not carry two empty handles each.
  std::string unit, cgroup, countersCgroup;
  std::uint64_t inode = 0;
  std::unique_ptr<cgroup::Cgroup> cg, countersCg;
  std::unique_ptr<lease::LeaseMeter> meter;  // reads `cg`; declared after it, destroyed before it
  std::optional<cgroup::AppliedLimits> applied;
  std::optional<std::uint64_t> oomKillsAtAdoption;

  // Endings.
  std::uint64_t graceDeadlineUs = 0;  // a run lease without its client is closed as lost after this
  std::uint64_t killDeadlineUs = 0;   // release of a run lease: SIGKILL the rest after this
  bool releaseRequested = false;
  bool recovered = false;                   // re-adopted after a daemon restart
  std::optional<std::size_t> lastPosition;  // the queue position its client was last told
  std::uint64_t lastToldUs = 0;             // monotonic: when its client was last told why it waits

  // The GPU bound: enforced by the daemon for attached leases; a run lease's
  // client enforces it and reports what happened ("bound").
  enforce::GpuBound bound;
  enforce::GpuBoundState boundState;
  // Its sampling cadence (enforce/cadence.h); near its bound it is sampled
  // every near_bound_interval. lastRowUs: when a sample row was last stored.
  enforce::Pace pace;
  std::uint64_t lastRowUs = 0;
  std::vector<enforce::BoundEvent> boundEvents;
  std::optional<std::string> tallyKill;  // the kill's summary, once tally killed it
  bool advisory = false;                 // the kernel charges GTT: gpu_memory_max reports only
  // Bound events a run lease's client may report (Limits::boundBurst at
  // once, one more per Limits::boundRefillUs), and how many were refused.
  TokenBucket boundReports{Limits{}.boundBurst, Limits{}.boundRefillUs};
  std::uint64_t boundRefused = 0;

  bool isRun() const { return kind == lease::LeaseKind::Run; }
  bool isAttach() const { return kind == lease::LeaseKind::Attach; }
};

const char* stateName(Lease::State s);  // "queued", "granted", "running"

}  // namespace tally::daemon
