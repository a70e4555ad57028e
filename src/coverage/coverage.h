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

#include "coverage/coverage_kind.h"
#include "devices/ttm.h"
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

// A dmem region (dmem.capacity) by the last part of its name: what a dmem.max
// on it would bound. A dmem region is a kernel limit tally could set per
// cgroup (dmem.max), a separate counter from memcg: never memcg charging.
enum class DmemKind {
  Vram,     // vram, vram0, ...: device memory
  Gtt,      // a name with gtt, system or sysmem in it: would bound GTT (none is registered today)
  Unknown,  // anything else (the cgroup-v2 documentation's own example: stolen)
};
DmemKind classifyDmemRegion(std::string_view name);  // "drm/<bdf>/<region>"
const char* dmemKindName(DmemKind k);                // "vram", "gtt", "unknown"

struct DmemRegion {
  std::string name;  // "drm/0000:c6:00.0/vram"
  std::uint64_t bytes = 0;
  DmemKind kind = DmemKind::Unknown;
};

struct StaticSigns {
  std::vector<Sign> signs;
  std::vector<DmemRegion> dmem;  // every region of the root's dmem.capacity
  // /proc/meminfo GPUActive and GPUReclaim (Linux 7.1+): every TTM page the
  // host's GPUs hold, global, not per cgroup.
  std::optional<std::uint64_t> gpuActiveBytes, gpuReclaimBytes;
  // memory.stat has gpu_active or dmem: the kernel names GPU bytes it charged
  // (coverage::Handover::statNamesGpu).
  bool statNamesGpu = false;
  // /proc/cgroups lists dmem; absent when /proc/cgroups is unreadable.
  std::optional<bool> dmemCompiledIn;
  bool suggestsCharging() const;
  std::vector<std::string> dmemGttRegions() const;
};

// Reads the signs: `statCgroup`'s memory.stat (a non-root cgroup; the root
// has no memory.stat on older kernels) for gpu_active and dmem, the
// ttm_memcg option of each loaded TTM module, the root's dmem.capacity and
// dmem.memcg, /proc/meminfo GPUActive.
StaticSigns readStaticSigns(const fs::Root& proc, const fs::Root& sys, const fs::Root* cgroupRoot,
                            const std::string& statCgroup, const devices::TtmModules& ttm);

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
  std::string gttKey;  // drm-total-gtt, or drm-memory-gtt where amdgpu printed only that (<6.5)
  std::optional<std::int64_t> deltaGpuActive;  // memory.stat gpu_active, when the key exists
  std::string detail;                          // the judgement in words, or what failed
};

// Judges the deltas. Pure. GTT is "charged" when memory.current grew by at
// least 90% of what the client's drm-total-gtt grew, "not charged" below 25%;
// inconclusive between, or when fdinfo did not show at least 90% of the
// requested buffer (the driver may not report it).
ProbeOutcome judgeProbe(std::uint64_t requested, std::int64_t deltaCurrent, std::int64_t deltaGtt,
                        std::string& why);

struct CoverageVerdict {
  Coverage coverage = Coverage::HostOnly;
  std::string basis;  // why, in words
  std::string line;   // "A lease's MemoryMax covers: host memory only"
  // Degraded: GTT exists here (a GPU) and MemoryMax does not cover it.
};

CoverageVerdict decide(const StaticSigns& signs, const std::optional<ProbeResult>& probe,
                       const std::string& kernel, bool gpuPresent);

nlohmann::ordered_json signsJson(const StaticSigns& s);
nlohmann::ordered_json probeJson(const ProbeResult& p);

}  // namespace tally::coverage
