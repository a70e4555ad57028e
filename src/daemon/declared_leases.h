// Declared leases ([leases.*]): a workload leased every time it runs. Each
// run of a declared unit becomes a lease, as if root had run `tally attach
// --unit` with the table's declarations (config::DeclaredLease), across unit
// and daemon restarts. The unit's runs come from the system manager
// (daemon/unit_runs.h); the transitions are the Service's, written in
// daemon/declared_leases.cpp:
//
//   startDeclared   at start (after recovery): watch each unit, lease it if it runs
//   leaseDeclared   a unit's run is leasable and not yet leased: admit it
//                   (root's attach, never queued); refused for want of room,
//                   it is tried again each second (retryDeclared)
//   noteDeclared    a run left unleased: said in the journal, once per reason
//
// One lease per run: a run whose lease ended (released, or refused past
// admission) is not leased again; its next run is.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace tally::daemon {

// A declared unit's state, between its runs.
struct DeclaredRun {
  std::string leasedInvocation;   // the run that got its lease
  std::string refusedInvocation;  // a run refused past admission: not tried again
  std::string refusedWhy;         // the last reason said in the journal
  bool waitsForRoom = false;      // refused for want of room: retried each second
};

// Every declared unit's state (by unit), and when the retry pass last ran.
struct DeclaredRuns {
  std::map<std::string, DeclaredRun> byUnit;
  std::uint64_t lastPassUs = 0;
};

}  // namespace tally::daemon
