// The outcome record of one lease: what was declared, what was applied and
// read back, how it ended, and what the meters saw. One JSON document (schema
// 1, docs/run.md) for --json and the ledger; one line for humans.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cgroup/cgroup.h"
#include "cgroup/limits.h"
#include "lease/meter.h"
#include "lease/outcome.h"
#include "lease/spec.h"
#include "probes/cgroup_memory.h"

namespace tally::lease {

struct LeaseRecord {
  LeaseSpec spec;
  std::string manager;  // "system", "user", "cgroupfs", or "none" when nothing was reached
  std::string unit, slice, cgroup;
  std::optional<cgroup::AppliedLimits> applied;
  std::uint64_t startedAtNs = 0, endedAtNs = 0;
  Outcome outcome;
  cgroup::FinalCounters counters;
  HostMeter host;
  GpuMeter gpu;
  std::vector<enforce::BoundEvent> gpuBound;  // what the GPU bound saw and did, in order
  std::vector<std::string> warnings;          // cleanup trouble and the like; never silent
};

nlohmann::ordered_json recordJson(const LeaseRecord& r);
std::string summaryLine(const LeaseRecord& r);
// Said when the workload is released, like systemd-run's "Running as unit":
// "tally: lease ID running as tally-ID.scope (MemoryMax=48.0 GiB, gpu_memory_max=40.0 GiB)".
std::string startLine(const LeaseRecord& r);

}  // namespace tally::lease
