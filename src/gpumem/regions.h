// A DRM client's memory per region, and sums of them that stay honest: a
// figure is stated only when every contributor reported its part. Pure.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "devices/drm_devices.h"
#include "devices/memory_class.h"
#include "probes/kernel_release.h"
#include "scanner/scan.h"

namespace tally::gpumem {

// A sum that is stated only if every contributor reported its part: a client
// that printed a region but not, say, its total makes the group's total
// unknown (absent), never a silent undercount.
struct Sum {
  std::uint64_t value = 0;
  bool complete = true;
  bool any = false;
  void add(const std::optional<std::uint64_t>& v);
  std::optional<std::uint64_t> get() const;
};

struct RegionSums {
  Sum resident, total, shared;
  // By the driver that printed the region; two drivers that disagree on one
  // name make it unknown.
  devices::MemoryClass cls = devices::MemoryClass::Unknown;
};
using RegionMap = std::map<std::string, RegionSums>;

// One client's regions (resident by the dedup rule in probes/), each classed
// by the client's driver: fdinfo's drm-driver, else the device's driver in
// sysfs.
struct ClientRegions {
  std::string driver;  // "" when neither fdinfo nor sysfs names it
  RegionMap regions;
  // The driver printed no memory figure at all (nouveau, virtio_gpu, vmwgfx;
  // a DRM_GEM_FOPS driver): the client's GPU memory is unknown, never 0.
  bool noFigures() const { return regions.empty(); }
};
ClientRegions clientRegions(const scanner::Scan& scan, const scanner::Client& c);
void addInto(RegionMap& into, const RegionMap& from);

// KFD's (ROCm's) figure for a set of processes: /sys/class/kfd/kfd/proc/
// <pid>/vram_<gpuid> of every context. kfd_ioctl_alloc_memory_of_gpu() adds
// every VRAM-flagged allocation to it, whatever domain it lands in: on an
// APU that places them in GTT (devices::rocmPlacement) the same bytes are in
// fdinfo's gtt already.
struct KfdFigure {
  std::uint64_t bytes = 0;       // VRAM-flagged, every context
  std::uint64_t inGttBytes = 0;  // of which on devices where ROCm places it in GTT
};
// Absent when the process has no KFD figure.
std::optional<KfdFigure> kfdFigure(const scanner::Process& p, const devices::DeviceMap& devices,
                                   const std::optional<probes::KernelRelease>& kernel);
void addInto(std::optional<KfdFigure>& into, const std::optional<KfdFigure>& from);

}  // namespace tally::gpumem
