// A DRM client's memory per region, and sums of them that stay honest: a
// figure is stated only when every contributor reported its part. Pure.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "devices/memory_class.h"
#include "scanner/scan.h"

namespace tally::report {

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

// The region figures of one client (resident by the dedup rule in probes/),
// each classed by the client's driver: fdinfo's drm-driver, else the
// device's driver in sysfs.
RegionMap clientRegions(const scanner::Scan& scan, const scanner::Client& c);
void addInto(RegionMap& into, const RegionMap& from);
// A process's VRAM by KFD (/sys/class/kfd/kfd/proc/<pid>/vram_*); absent when it has none.
std::optional<std::uint64_t> kfdVramBytes(const scanner::Process& p);

}  // namespace tally::report
