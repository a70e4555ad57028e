// How much GTT (system RAM mapped for the GPU) a device's clients may hold,
// for each of the two kinds of client an APU has (docs/gpu.md, "GTT ceiling"),
// as the kernel computes it:
//
//   graphics  Mesa, Vulkan, OpenGL through the render node: every TT placement
//             fails with -ENOSPC past the GTT manager's size
//             (amdgpu_gtt_mgr_new), mem_info_gtt_total. amdgpu sizes it from
//             amdgpu.gttsize (MiB) when given (deprecated), else from TTM's
//             pages_limit.
//   compute   ROCm/HIP through /dev/kfd: the smallest of three caps
//             (amdgpu_amdkfd_gpuvm_init_mem_limits,
//             amdgpu_amdkfd_reserve_mem_limit), per kernel era:
//               GTT manager   mem_info_gtt_total: KFD's buffers are TT
//                             placements too, so a *smaller* gttsize caps ROCm
//               KFD TTM limit ttm_tt_pages_limit() << PAGE_SHIFT since about
//                             6.5; before, 3/8 of the RAM free when amdgpu
//                             loaded (unknowable afterwards)
//               KFD system    MemTotal - MemTotal/64 - 1.5 GiB since about 6.7
//                             (halved instead when that is under 3 GiB;
//                             ignored with amdgpu.no_system_mem_limit=1);
//                             before, 15/16 of the RAM free at load
//             Both KFD limits are global across devices and latched when
//             amdgpu loads. amdgpu only (KFD).
//
// Headroom takes the smaller of the two, unless a pool names the one its
// workloads use (gtt_ceiling). Pure, but for the reads of amdgpu's module
// parameters.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "devices/drm_devices.h"
#include "devices/gtt_consumer.h"
#include "devices/ttm.h"
#include "fs/root.h"
#include "probes/kernel_release.h"

namespace tally::devices {

struct Ceiling {
  std::optional<std::uint64_t> bytes;
  std::string source;                  // where the figure comes from, with its unit
  std::optional<std::string> unknown;  // why bytes is absent
};

// One of the compute ceiling's caps. `applies` is false for a cap the host
// switched off (no_system_mem_limit): neither known nor unknown, not a cap.
struct CeilingTerm {
  std::string name;  // "GTT manager", "KFD TTM limit", "KFD system limit"
  Ceiling value;
  bool applies = true;
};

// amdgpu's module parameters the ceilings depend on (mode 0600 for gttsize:
// root only).
struct AmdgpuParams {
  std::optional<std::int64_t> gttsizeMib;  // -1 = auto
  std::optional<std::string> gttsizeUnreadable;
  std::optional<bool> noSystemMemLimit;  // absent: not exported (older amdgpu) or unreadable
  std::string noSystemMemLimitEvidence;
  bool gttsizeSet() const { return gttsizeMib && *gttsizeMib > 0; }
};
AmdgpuParams readAmdgpuParams(const fs::Root& sys);

// KFD's two global limits as this kernel computes them, from the kernel
// release, MemTotal, the TTM module serving amdgpu and amdgpu's parameters.
struct KfdLimits {
  CeilingTerm ttm{"KFD TTM limit", {}, true};
  CeilingTerm system{"KFD system limit", {}, true};
  std::string era;  // "6.7 and later", "6.5 to 6.6", "before 6.5", or why it is unknown
};
struct KfdLimitInputs {
  std::optional<probes::KernelRelease> kernel;
  std::optional<std::uint64_t> memTotalBytes;
  const TtmModules* ttm = nullptr;
  const AmdgpuParams* amdgpu = nullptr;
  std::uint64_t pageSize = 4096;
};
KfdLimits kfdLimits(const KfdLimitInputs& in);

struct GttCeilings {
  Ceiling graphics;
  // The smallest of computeTerms; absent (with the first unknown term's
  // reason) when any term that applies is unknown: the smallest of the known
  // ones would be a ceiling the kernel may never grant.
  Ceiling compute;
  std::vector<CeilingTerm> computeTerms;  // GTT manager, KFD TTM, KFD system (amdgpu only)
  std::string ttmModule;                  // the TTM module serving the device, "" when unknown
  std::string ttmHow;                     // how it was found, in words

  // The ceiling a consumer's headroom is measured against, and which one it
  // is ("graphics" or "compute"; Smaller picks the smaller known one).
  std::optional<std::uint64_t> forConsumer(GttConsumer c, const char** which = nullptr) const;
  // Which ceiling Smaller picks and why, in words: "the compute ceiling
  // (the smaller)", "... (the two are equal)", "... (the only one known)";
  // "" when none is known.
  std::string smallerInWords() const;
};

GttCeilings gttCeilings(const DrmDevice& d, const TtmModules& ttm, const KfdLimits& kfd);

// The device's GTT not in use, against a consumer's ceiling: the ceiling
// less mem_info_gtt_used (0 when over it).
std::optional<std::uint64_t> gttFree(const DrmDevice& d, const GttCeilings& ceilings,
                                     GttConsumer consumer);

// What more can be placed in GTT on a device for a consumer: gttFree, never
// more than the host's MemAvailable (GTT is system RAM). The one rule for GTT
// headroom, of `tally gpu` and of the daemon's pools.
std::optional<std::uint64_t> gttHeadroom(const DrmDevice& d, const GttCeilings& ceilings,
                                         GttConsumer consumer,
                                         std::optional<std::uint64_t> memAvailable);

// Where ROCm puts memory it asks for as VRAM (hipMalloc) on an amdgpu
// device. kfd_ioctl_alloc_memory_of_gpu() counts every VRAM-flagged
// allocation in vram_<gpuid> whatever domain it lands in; with
// adev->apu_prefer_gtt (an APU whose GTT is larger than its carve-out, since
// about 6.10) amdgpu_amdkfd_gpuvm_alloc_memory_of_gpu() places it in GTT.
// Judged from mem_info_vram_total < mem_info_gtt_total, as the kernel does.
struct RocmPlacement {
  enum class Where { Gtt, Vram, Unknown } where = Where::Unknown;
  std::string evidence;
};
RocmPlacement rocmPlacement(const DrmDevice& d, const std::optional<probes::KernelRelease>& kernel);

// Advice on the GTT settings, or nothing when there is none to give:
// amdgpu.gttsize set (deprecated; what it caps; the pages_limit that gives
// graphics and ROCm the same ceiling), or a pages_limit above KFD's system
// limit (ROCm stops there). A suggested pages_limit is never above the KFD
// system limit.
std::optional<std::string> gttAdvice(const AmdgpuParams& amdgpu, const TtmModules& ttm,
                                     const KfdLimits& kfd, std::uint64_t pageSize);

}  // namespace tally::devices
