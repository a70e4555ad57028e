// What kind of lease it is, and what an attached lease was pointed at.
// Passive types shared by the daemon, its RPC and its ledger rows.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

namespace tally::lease {

// run: the client (tally run --pool) runs the scope and reports the outcome.
// attach: the daemon adopts a workload that already runs and ends the lease itself.
enum class LeaseKind { Run, Attach };
constexpr const char* kindName(LeaseKind k) { return k == LeaseKind::Run ? "run" : "attach"; }
constexpr std::optional<LeaseKind> parseKind(std::string_view s) {
  if (s == "run") return LeaseKind::Run;
  if (s == "attach") return LeaseKind::Attach;
  return std::nullopt;
}

// A container as its engine names it (tally attach --container).
struct Container {
  std::string engine;  // "podman" or "docker"
  std::string id;      // 64 hex
  std::string name;
};

// Exactly one of unit, cgroup (canonical) and pid. A container is named by
// its init process (pid) and the engine's id and name; the daemon leases the
// container's whole cgroup and checks that it is that container's.
struct AttachTarget {
  std::string unit;
  std::string cgroup;
  std::optional<pid_t> pid;
  std::optional<Container> container;  // with pid only
  bool empty() const { return unit.empty() && cgroup.empty() && !pid; }
};

}  // namespace tally::lease
