// Where a lease runs, and whether the one asking may put it there.
//
// attach: a workload that already runs becomes a lease. What the operator
// named (a unit, a cgroup, a process) is resolved to one canonical cgroup,
// opened without following symlinks, and checked against who asks; at the
// grant, the declared MemoryMax is applied (through systemd for a unit's
// cgroup) and read back by contain::verifyLimits, the same read-back a run
// lease gets before its workload execs.
//
// started: a run lease's client says which cgroup it made; it must be the
// lease's own and the caller's, and its final counters read from the lease's
// cgroup, below it, or its own slice.
#pragma once

#include <optional>
#include <string>

#include "bpf/kernel_charge.h"
#include "daemon/lease.h"
#include "daemon/lease_book.h"
#include "daemon/seams.h"
#include "fs/root.h"
#include "ledger/rows.h"
#include "rpc/lease_api.h"

namespace tally::daemon {

// A refusal: the RPC error code and the message the client reads.
struct Denial {
  const char* code;
  std::string message;
};

struct PlacementEnv {
  const fs::Root& proc;
  const fs::Root* cgroupRoot;
  Units* units;
  std::uint64_t pageSize;
  const fs::Root* sys = nullptr;  // for measuring a workload's GPU memory on arrival
  // The kernel charge, for a charge an earlier lease of the cgroup left
  // (carried into the new lease's figure) on arrival.
  const bpf::KernelCharge* charge = nullptr;
  // The widest tree a non-root user's attached lease may have: the cgroups
  // the sampler walks for one user per round (Limits::maxCgroupsWalkedPerUid),
  // so a lease admitted is a lease its owner's budget can meter.
  std::size_t walkBudget = cgroup::SubtreeLimits{}.maxCgroups;
};

// Where the workload lives (l.place.cgroup, l.place.inode, l.place.cg, l.place.unit, l.target are
// set), and whether `peer` may lease it with these limits: the directory is
// theirs, a --memory-max is one they could write themselves, and no other
// lease holds the cgroup.
std::optional<Denial> placeAttach(const PlacementEnv& env, const LeaseBook& book, const Peer& peer,
                                  const rpc::api::Attach& a, Lease& l);

// Measure before granting: an attached workload already over a declared
// limit would be killed on arrival (the kernel OOM-kills under a MemoryMax
// below memory.current; tally kills GPU memory over gpu_memory_max after K
// samples). Refused with the figures unless `force`. A figure that cannot be
// measured refuses nothing (the meter then says why). After placeAttach.
std::optional<Denial> refuseOverOnArrival(const PlacementEnv& env, const Lease& l, bool force);

// At the grant: the declared MemoryMax applied and read back, the OOM kills
// so far remembered (the outcome counts those after adoption). The error
// refuses the lease.
Status adopt(const PlacementEnv& env, Lease& l);

// A run lease's `started`: the cgroups are checked and opened (l.place.cgroup,
// l.place.countersCgroup, l.place.inode, l.place.cg, l.place.countersCg, l.place.unit are set).
std::optional<Denial> placeRun(const PlacementEnv& env, const LeaseBook& book, const Peer& peer,
                               const rpc::api::Started& p, Lease& l);

// The unit's run this lease holds (its InvocationID), so that its end is told
// from a restart of the unit.
void noteInvocation(Units* units, Lease& l);

// After a daemon restart: the placement its placed row recorded, reopened
// where it is still the very same (the cgroup's inode, the unit's cgroup);
// else why not. The recorded fields are set either way (a lost lease's
// record names them).
std::optional<std::string> reopenPlacement(const fs::Root* cgroupRoot, Units* units, Lease& l,
                                           const ledger::PlacedRow& placed);

}  // namespace tally::daemon
