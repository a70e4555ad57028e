// What an operator declared for one lease. Every limit is optional: tally
// applies exactly what is declared and nothing else (doctrine 3).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "enforce/gpu_bound.h"
#include "lease/declaration.h"

namespace tally::lease {

enum class OomPolicy { Kill, Stop, Continue };
const char* oomPolicyName(OomPolicy p);  // systemd's spelling: "kill", "stop", "continue"

// Who creates the lease's cgroup.
enum class Manager {
  Auto,      // root: the system manager; otherwise the user manager; cgroupfs when none answers
  System,    // systemd's system manager over the system bus
  User,      // the calling user's systemd --user manager
  Cgroupfs,  // tally creates the cgroup itself in a delegated cgroup v2 subtree
};

struct LeaseSpec {
  std::string id;  // [0-9a-z], no dash: systemd nests "a-b.slice" under "a.slice"
  // What the operator declared; its name defaults to the command's basename.
  Declaration declaration;
  // The kernel's state this run is planned for (enforce::plan): from the
  // daemon's grant, or standalone from the ledger's coverage of this kernel.
  // The hand-over's MemoryMax (--memory-max + --gpu-memory-max) and an
  // advisory bound follow from it; the declaration keeps what was declared.
  enforce::KernelState kernel;
  std::optional<std::uint64_t> memoryHigh;
  std::optional<std::uint64_t> memorySwapMax;
  OomPolicy oomPolicy = OomPolicy::Kill;
  std::uint64_t sampleIntervalUs = 1000000;
  std::string slice = "tally.slice";  // parent slice of the lease's own slice
  Manager manager = Manager::Auto;
  std::optional<std::string> cgroupParent;  // cgroupfs mode: where lease cgroups are made
  std::vector<std::string> command;

  // How this run is enforced: the one decision (enforce::plan), which the
  // runner, the containment and the record read.
  enforce::Plan plan() const {
    return enforce::plan(boundsOf(declaration, sampleIntervalUs), nullptr, kernel);
  }
  // What MemoryMax holds: the hand-over's sum, or what was declared.
  std::optional<std::uint64_t> memoryMax() const { return plan().memoryMax; }
};

// Unit names derived from a spec: the lease's own slice nests under `slice`
// ("tally.slice" + id -> "tally-<id>.slice") and holds the scope.
std::string leaseSliceName(const LeaseSpec& spec);
std::string leaseScopeName(const LeaseSpec& spec);

// A lease label: 1-64 of [A-Za-z0-9._-], safe in unit descriptions and logs.
bool validLeaseName(std::string_view name);

// A fresh lease id: 12 lowercase hex digits from getrandom().
std::string newLeaseId();

}  // namespace tally::lease
