// What the lease service needs from the world around it, as interfaces: the
// event loop's connections and inotify watches, and systemd (the journal's
// seam is journal::Journal, shared with tally run). The daemon
// implements them over sd-event and sd-bus; tests implement them in memory
// and observe every side effect.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "daemon/unit_runs.h"
#include "journal/journal.h"
#include "util/result.h"

namespace tally::daemon {

using journal::Journal;

// Who is on the other end of a connection (SO_PEERCRED, read once at accept).
struct Peer {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  // Its supplementary groups as the kernel holds them (SO_PEERGROUPS, read
  // at accept): membership is decided without an NSS look-up on the loop.
  std::vector<gid_t> groups{};
};

class Outbox {
 public:
  virtual ~Outbox() = default;
  // Queues one line to a connection; false when it is gone.
  virtual bool send(std::uint64_t conn, std::string line) = 0;
  // Asks the loop for turns of Service::backgroundWork() until it says it
  // is done (a replay served in slices, between other clients' requests).
  virtual void wantTurn() = 0;
  // Bytes queued to a connection and not yet taken by its client: a replay
  // waits while its reader is behind, rather than fill the daemon for it.
  virtual std::size_t backlog(std::uint64_t conn) const = 0;
};

class Watches {
 public:
  virtual ~Watches() = default;
  // Calls the service's cgroupChanged(leaseId) whenever `path` is modified;
  // a lease may have several watches (its cgroup.events and memory.events).
  virtual Status watch(const std::string& leaseId, const std::string& path) = 0;
  // Also calls cgroupChanged(leaseId) when process `pid` exits (a pidfd in
  // the loop): an attached --pid workload's end is seen at once, even when
  // the cgroup.events write is missed. Best effort: false if no pidfd.
  virtual bool watchPid(const std::string& leaseId, pid_t pid) = 0;
  // Drops every watch of the lease.
  virtual void unwatch(const std::string& leaseId) = 0;
};

class Units {
 public:
  virtual ~Units() = default;
  // The unit's ControlGroup ("" when it has none, i.e. it is not running).
  virtual Result<std::string> controlGroup(const std::string& unit) = 0;
  // SetUnitProperties(unit, runtime=true, MemoryMax=bytes).
  virtual Status setMemoryMax(const std::string& unit, std::uint64_t bytes) = 0;
  // KillUnit(unit, "all", signal): every process of the unit's cgroup.
  virtual Status killUnit(const std::string& unit, int signal) = 0;
  // StopUnit(unit, "replace"), not waited for: a run lease's slice that its
  // client (killed) never removed.
  virtual Status stopUnit(const std::string& unit) = 0;
  // The unit's state and run now (loading it if systemd had unloaded it).
  virtual Result<UnitRun> run(const std::string& unit) = 0;
  // Calls the service's unitChanged(unit) whenever systemd signals a change
  // of the unit (PropertiesChanged after Manager.Subscribe): no polling.
  virtual Status watchUnit(const std::string& unit) = 0;
};

}  // namespace tally::daemon
