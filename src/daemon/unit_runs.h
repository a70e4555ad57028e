// The runs of a systemd unit, as a declared lease follows them ([leases.*],
// docs/daemon.md "Declared leases"). Pure: the facts come from the system
// manager (Units::run), the words and the decisions are made here.
//
// A unit's run is one invocation (InvocationID, new at every start). A lease
// holds one run: it ends when that run's cgroup empties, and the unit's next
// run is a new lease (declared) or unleased (attached by hand) — the ledger
// keeps one row per run.
#pragma once

#include <string>

namespace tally::daemon {

// What systemd says about a unit now (org.freedesktop.systemd1.Unit).
struct UnitRun {
  std::string activeState;   // active, reloading, inactive, failed, activating, deactivating
  std::string subState;      // running, auto-restart, start-pre, exited, dead, ...
  std::string invocation;    // InvocationID as 32 hex digits; "" when it never ran
  std::string controlGroup;  // "" when it has none
  std::string jobType;       // the pending job's type (start, restart, stop, ...); "" for none
};

// Whether the run is one a declared lease takes now: it is up (active or
// reloading, or activating in its start or start-post phase: the main
// process runs) and has processes somewhere to meter. A run still in
// start-pre, or a oneshot's exited remains, is not.
bool runLeasable(const UnitRun& run);

// How the run a lease adopted (`adoptedInvocation`) ended, judged from what
// the unit shows now, once the lease's cgroup has emptied.
struct RunEnding {
  bool restart = false;  // the unit runs again (or is about to): a new run, not this lease's
  std::string words;     // "unit llama.service restarted (a new run, invocation 3f2a…)"
};
RunEnding runEnding(const std::string& unit, const std::string& adoptedInvocation,
                    const UnitRun& now);

}  // namespace tally::daemon
