// GTT -> memcg coverage: does this kernel charge GPU memory held in system RAM
// (GTT) to the allocating task's memory cgroup, so that a lease's MemoryMax
// already bounds it? (KERNEL-FACTS §1.8, docs/coverage.md.)
//
// Static signs are hints read from the kernel's files; only the active probe
// (coverage/active_probe.h) proves charging. tally assumes "host memory only"
// -- and keeps bounding GTT itself -- until a probe on this kernel says
// otherwise: a wrong "covered" would double the real bound, a wrong "host
// only" merely counts GTT twice in headroom (meters only reduce headroom).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "fs/root.h"

namespace tally::coverage {

struct Sign {
  std::string name;             // "memory.stat gpu_active", "ttm.ttm_memcg", ...
  std::optional<bool> present;  // absent: the file could not be read (evidence says why)
  std::string evidence;         // what was read, where
  // Whether the sign, when present, means GTT may be charged to memcg (the
  // global GPUActive counter, say, does not).
  bool suggestsCharging = false;
};

struct StaticSigns {
  std::vector<Sign> signs;
  std::vector<std::string> dmemRegions;     // every line of dmem.capacity: "<region> <bytes>"
  std::vector<std::string> dmemGttRegions;  // regions not named vram*: a dmem GTT region
  bool suggestsCharging() const;
};

// Reads the signs: `statCgroup`'s memory.stat (a non-root cgroup; the root
// has no memory.stat on older kernels), /sys/module/{ttm,amdttm}/parameters/
// ttm_memcg, the root's dmem.capacity, /proc/meminfo GPUActive.
StaticSigns readStaticSigns(const fs::Root& proc, const fs::Root& sys, const fs::Root* cgroupRoot,
                            const std::string& statCgroup);

enum class ProbeOutcome { Charged, NotCharged, Inconclusive, NoProbe, Failed };
const char* probeOutcomeName(
    ProbeOutcome o);  // "charged", "not-charged", "inconclusive", "no-probe", "failed"

struct ProbeResult {
  ProbeOutcome outcome = ProbeOutcome::Failed;
  std::string kernel;
  std::string device;  // BDF or platform name
  std::string driver;
  std::string cgroup;  // the throw-away cgroup
  std::uint64_t requestedBytes = 0;
  std::optional<std::int64_t> deltaMemoryCurrent;  // bytes
  std::optional<std::int64_t> deltaDrmTotalGtt;    // bytes, of the probe's own DRM client
  std::optional<std::int64_t> deltaGpuActive;      // memory.stat gpu_active, when the key exists
  std::string detail;                              // the judgement in words, or what failed
};

// Judges the deltas. Pure. GTT is "charged" when memory.current grew by at
// least 90% of what the client's drm-total-gtt grew, "not charged" below 25%;
// inconclusive between, or when fdinfo did not show at least 90% of the
// requested buffer (the driver may not report it).
ProbeOutcome judgeProbe(std::uint64_t requested, std::int64_t deltaCurrent, std::int64_t deltaGtt,
                        std::string& why);

enum class Coverage { HostOnly, HostAndGtt };
const char* coverageName(Coverage c);  // "host", "host+gtt"

struct CoverageVerdict {
  Coverage coverage = Coverage::HostOnly;
  std::string basis;  // why, in words
  std::string line;   // "A lease's MemoryMax covers: host memory only"
  // Degraded: GTT exists here (a GPU) and MemoryMax does not cover it.
  bool degraded = false;
};

CoverageVerdict decide(const StaticSigns& signs, const std::optional<ProbeResult>& probe,
                       const std::string& kernel, bool gpuPresent);

nlohmann::ordered_json signsJson(const StaticSigns& s);
nlohmann::ordered_json probeJson(const ProbeResult& p);

}  // namespace tally::coverage
