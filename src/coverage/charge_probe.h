// The kernel charge's probe (tally doctor --active): does the kernel charge
// (bpf/) charge exactly what each allocation path of this host's drivers
// makes, and refuse the next one past a bound? In a throw-away cgroup armed as
// a lease, a child process allocates N bytes through each decoded path the
// host has (amdgpu GEM_CREATE in GTT and VRAM, KFD ALLOC_MEMORY_OF_GPU in GTT
// and VRAM, a dumb buffer, xe GEM_CREATE, the VM test driver's own CREATE);
// the lease's charge delta is compared with the driver's own figures (the
// client's fdinfo delta, the device's mem_info_*_used delta), then the bound is
// set to the charge + N/2 and one more allocation of N must be refused with
// ENOMEM. It uses the daemon's programs when they are attached (its pins), else
// loads its own into a pin directory of its own and removes it after. Root.
//
// The judging (judgeCharge, judgeRefusal, pathLine, the JSON) is pure; only
// runChargeProbe does I/O.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "bpf/availability.h"
#include "bpf/kernel_charge.h"
#include "devices/drm_devices.h"
#include "fs/root.h"

namespace tally::coverage {

enum class ChargePath { AmdgpuGtt, AmdgpuVram, KfdGtt, KfdVram, Dumb, Xe, TestDrm };
inline constexpr ChargePath kChargePaths[] = {
    ChargePath::AmdgpuGtt, ChargePath::AmdgpuVram, ChargePath::KfdGtt, ChargePath::KfdVram,
    ChargePath::Dumb,      ChargePath::Xe,         ChargePath::TestDrm};
// "amdgpu-gem-create-gtt", "kfd-alloc-vram", "dumb", "xe-gem-create", "testdrm-create", ...
const char* chargePathName(ChargePath p);
// "amdgpu GEM_CREATE (GTT)", "KFD ALLOC_MEMORY_OF_GPU (VRAM)", "MODE_CREATE_DUMB", ...
const char* chargePathWords(ChargePath p);

// A driver's figure for one allocation (a delta, bytes), or why there is none.
struct Figure {
  std::optional<std::int64_t> bytes;
  std::string source;  // where it was read: "drm-total-gtt", "mem_info_gtt_used+mem_info_vram_used"
  std::string absent;  // why there is none (set when bytes is absent)
};

// What one path did, as measured. Raw figures only: the judgement is
// judgeCharge() and judgeRefusal().
struct PathResult {
  ChargePath path = ChargePath::Dumb;
  bool present = false;
  std::string notPresent;            // why the host lacks it
  std::string device;                // the DRM device's key (BDF or platform name)
  std::string node;                  // the node allocated on: /dev/dri/renderD128, /dev/kfd
  std::uint64_t requestedBytes = 0;  // N, page-aligned
  // The path could not be probed (opening the node, the first allocation, the
  // child): what failed. The figures below are then partial.
  std::optional<std::string> failed;
  std::optional<std::int64_t> charge;  // the lease's charge delta over the first allocation
  Figure fdinfo;                       // the client's fdinfo delta (every region it printed)
  Figure memInfo;                      // the device's mem_info_*_used delta (device-wide)
  // The refusal: tried unless refusalNotTried says why not.
  std::optional<std::string> refusalNotTried;
  std::uint64_t boundBytes = 0;       // set to the charge + N/2
  std::uint64_t chargeAtBound = 0;    // the lease's charge when it asked again
  std::uint64_t chargeAfterTry = 0;   // and after
  std::optional<std::int32_t> tryRc;  // the second allocation: 0, or -errno
  std::uint64_t refusedDelta = 0;     // the lease's refusal counter over the try
  std::uint64_t failsafeDelta = 0;    // of those, refused failing closed (not at the bound)
  std::string failsafeReason;         // the refusal's reason, when known
};

enum class ChargeJudgement { Exact, Differs, Unknown };
struct ChargeVerdict {
  ChargeJudgement judgement = ChargeJudgement::Unknown;
  std::string compared;  // "fdinfo", "mem_info" or "requested": the figure the charge was held to
  std::int64_t against = 0;
  std::int64_t difference = 0;  // charge - against
  std::string words;            // "charged exactly (...)", "differs by N bytes (...)"
};
// The charge against the driver's own figures: the client's fdinfo delta
// (exact, per client) where it has one; else the device's mem_info delta
// (device-wide: exact on an idle device); else the size asked, page-aligned
// (what the driver's own arithmetic makes), said as such.
ChargeVerdict judgeCharge(const PathResult& p);

enum class RefusalJudgement { Refused, NotRefused, NotTried };
struct RefusalVerdict {
  RefusalJudgement judgement = RefusalJudgement::NotTried;
  std::string words;  // "refused at the bound (...)", "not refused: ...", "refusal not tried: ..."
};
RefusalVerdict judgeRefusal(const PathResult& p);

// One line for a path: "charged exactly (...), refused at the bound (...)",
// "differs by N bytes (charge X, fdinfo Y, mem_info Z), ...", "not present (why)",
// "could not be probed: ...".
std::string pathLine(const PathResult& p);
// Whether the path found the bound wrong: a charge that differs, or an
// allocation past the bound not refused there.
bool pathFinding(const PathResult& p);

enum class ChargeProbeOutcome { Ran, Unavailable, Failed };
const char* chargeProbeOutcomeName(ChargeProbeOutcome o);  // "ran", "unavailable", "failed"

struct ChargeProbeResult {
  ChargeProbeOutcome outcome = ChargeProbeOutcome::Failed;
  std::string detail;  // unavailable: the availability verdict's words; failed: what failed
  std::string source;  // whose programs: the daemon's pins, or loaded for the probe
  bool refusing = false;
  std::string cgroup;  // the throw-away cgroup
  std::uint64_t cgroupId = 0;
  std::uint64_t bytes = 0;  // N
  std::vector<PathResult> paths;

  bool anyFinding() const;
  bool anyPathFailed() const;
};

nlohmann::ordered_json pathJson(const PathResult& p);
nlohmann::ordered_json chargeProbeJson(const ChargeProbeResult& r);

struct ChargeProbeOptions {
  std::uint64_t bytes = 64ULL << 20;
  std::string cgroupParent = "/";
  std::string devDir = "/dev/dri";
  std::string kfdNode = "/dev/kfd";
  std::string daemonPins = "fs/bpf/tally";  // under the sys root
  int stepTimeoutMs = 10'000;               // per step of a child
  int settleMs = 5'000;                     // for a path's buffers to be freed before the next
};

// `facts` and `verdict`: bpf::readHostFacts and bpf::assess of this host (the
// doctor's). Which paths the host has follows its DRM devices as the charge
// registers them (bpf::discoverDeviceRules: the driver each one's
// DRM_IOCTL_VERSION names) and /dev/kfd with KFD's topology.
ChargeProbeResult runChargeProbe(const fs::Root& proc, const fs::Root& sys,
                                 const fs::Root& cgroupRoot, const devices::DeviceMap& devices,
                                 const bpf::HostFacts& facts, const bpf::Verdict& verdict,
                                 const ChargeProbeOptions& o);

}  // namespace tally::coverage
