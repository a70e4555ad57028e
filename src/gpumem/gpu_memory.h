// The GPU memory of a set of DRM clients (and their processes' KFD figure):
// the one figure a lease's meter, gpu_memory_max, budgets, headroom and
// `tally gpu`'s counted_bytes all use (docs/enforcement.md, "What counts").
// Pure.
//
// Per region, over the clients (each DRM client once, by the fdinfo dedup
// rule):
//   region = sum(resident) - sum(shared) + max(shared)
// A buffer shared between two clients of the set (one exports, the other
// imports) sits in both clients' resident and shared figures; this counts the
// shared set once, as large as the largest client's shared set. It is exact
// when the clients share the same buffers, a lower bound otherwise; never
// more than sum(resident) and never less than the largest client's
// resident. A kill is decided on it, so it errs low, never high.
//
// The figure is the sum of the regions whose memory class
// (devices/memory_class.h) is device, host-uncharged or host-mixed;
// host-charged bytes are already in memory.current, and other or unknown
// regions are shown, not summed.
//
// KFD is a floor, never a region: kfd_ioctl_alloc_memory_of_gpu() counts
// every VRAM-flagged allocation in vram_<gpuid> whatever domain it lands in,
// and on an APU with apu_prefer_gtt those buffers are in fdinfo's gtt
// already (KERNEL-FACTS §10). So the KFD sum raises the figure only when it
// exceeds the whole fdinfo sum (older kernels whose fdinfo misses KFD
// buffers), and is never added to it.
//
// Unknown, never 0: a client whose driver prints no memory figure, or a
// counted region printed without a resident figure, makes the sum absent
// with the reason.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "devices/memory_class.h"
#include "gpumem/regions.h"

namespace tally::gpumem {

struct GpuMemory {
  // The counted figure; absent (see `unknown`) when a part of it is unknown.
  std::optional<std::uint64_t> bytes;
  // The host-uncharged part of `bytes` (GTT and its kin, and a KFD floor's
  // excess on devices that place ROCm's memory in GTT): what the kernel
  // charges to memory.current once it charges GTT (the hand-over).
  std::uint64_t hostUncharged = 0;
  std::uint64_t hostMixed = 0;  // the host-mixed part (i915 system0 on a discrete part)
  // Every region with a resident figure, by the rule above, counted or not:
  // fdinfo's figures only.
  std::map<std::string, std::uint64_t> regions;
  std::map<std::string, devices::MemoryClass> classes;  // of every region seen
  std::uint64_t sharedCountedOnce = 0;  // bytes the naive sum would have counted again
  // The counted classes' fdinfo sum, before KFD's floor.
  std::optional<std::uint64_t> fdinfoBytes;
  std::optional<KfdFigure> kfd;  // shown beside, labelled
  std::uint64_t kfdAbove = 0;    // what the KFD floor added above fdinfoBytes
  // "drm-fdinfo", or "drm-fdinfo+kfd-sysfs" when the KFD floor raised the figure.
  std::string source;
  std::optional<std::string> unknown;  // why `bytes` is absent, in words
};

GpuMemory countGpuMemory(const std::vector<const ClientRegions*>& clients,
                         const std::optional<KfdFigure>& kfd);

// `regions` (GpuMemory::regions) summed by their class in `classes` (a
// region it does not class is unknown): what a stored sample holds, by memory
// class rather than by any driver's region names. fdinfo's figures only (no
// KFD floor: the counted figure with it is GpuMemory::bytes).
devices::BytesByClass bytesByClass(const std::map<std::string, std::uint64_t>& regions,
                                   const std::map<std::string, devices::MemoryClass>& classes);

}  // namespace tally::gpumem
