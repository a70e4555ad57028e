// How much GTT (system RAM mapped for the GPU) a device's clients may hold,
// for each of the two kinds of client an APU has (docs/gpu.md, "GTT ceiling"):
//
//   graphics  Mesa, Vulkan, OpenGL through the render node: the device's GTT
//             domain, mem_info_gtt_total. amdgpu sizes it from
//             amdgpu.gttsize (MiB) when given (deprecated), else from TTM's
//             pages_limit.
//   compute   ROCm/HIP through /dev/kfd: amdgpu_amdkfd_gpuvm_init_mem_limits()
//             sets max_ttm_mem_limit = ttm_tt_pages_limit() << PAGE_SHIFT,
//             the pages_limit of the TTM module that serves amdgpu, whatever
//             gttsize says. amdgpu only (KFD).
//
// With gttsize=131072 and a default pages_limit, sysfs says 128 GiB of GTT
// while ROCm gets half the RAM: a headroom figure from the first would be
// wrong for every ROCm lease. So headroom takes the smaller of the two,
// unless a pool names the one its workloads use (gtt_ceiling). Pure, but for
// the read of amdgpu.gttsize.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "devices/drm_devices.h"
#include "devices/gtt_consumer.h"
#include "devices/ttm.h"
#include "fs/root.h"

namespace tally::devices {

struct Ceiling {
  std::optional<std::uint64_t> bytes;
  std::string source;                  // where the figure comes from, with its unit
  std::optional<std::string> unknown;  // why bytes is absent
};

struct GttCeilings {
  Ceiling graphics;
  Ceiling compute;        // absent (with the reason) for drivers without KFD
  std::string ttmModule;  // the TTM module serving the device, "" when unknown
  std::string ttmHow;     // how it was found, in words

  // The ceiling a consumer's headroom is measured against, and which one it
  // is ("graphics" or "compute"; Smaller picks the smaller known one).
  std::optional<std::uint64_t> forConsumer(GttConsumer c, const char** which = nullptr) const;
  // Which ceiling Smaller picks and why, in words: "the compute ceiling
  // (the smaller)", "... (the two are equal)", "... (the only one known)";
  // "" when none is known.
  std::string smallerInWords() const;
};

GttCeilings gttCeilings(const DrmDevice& d, const TtmModules& ttm, std::uint64_t pageSize);

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

// amdgpu.gttsize (MiB; -1 = auto; mode 0600, root only).
struct AmdgpuGttsize {
  std::optional<std::int64_t> mib;
  std::optional<std::string> unreadable;
  bool set() const { return mib && *mib > 0; }
};
AmdgpuGttsize readAmdgpuGttsize(const fs::Root& sys);

// When gttsize is set: that it is deprecated, that ROCm does not see it, and
// the pages_limit setting that gives both consumers the same ceiling.
std::optional<std::string> gttsizeAdvice(const AmdgpuGttsize& g, const TtmModules& ttm,
                                         std::uint64_t pageSize);

}  // namespace tally::devices
