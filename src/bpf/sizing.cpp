#include "bpf/sizing.h"

#include <algorithm>

namespace tally::bpf {

Sizing sizeMaps(std::optional<std::uint64_t> gpuMemoryBytes, std::uint64_t admitted,
                std::uint64_t objectsPerLease) {
  Sizing s;
  constexpr std::uint64_t GiB = 1ULL << 30;
  std::uint64_t gib =
      gpuMemoryBytes ? *gpuMemoryBytes / GiB + (*gpuMemoryBytes % GiB != 0 ? 1 : 0) : 0;
  // No overflow: at most 2^34 GiB before the product passes 2^64; clamp first.
  gib = std::min<std::uint64_t>(gib, kMaxObjects);
  s.objects = std::clamp(gib * kObjectsPerGiB, kMinObjects, kMaxObjects);
  admitted = std::min<std::uint64_t>(admitted, kMaxLeases);
  s.leases = std::clamp(admitted * kLeaseSlotsPerWaiter, kMinLeases, kMaxLeases);
  s.objectsPerLease = std::clamp<std::uint64_t>(
      objectsPerLease ? objectsPerLease : kDefaultObjectsPerLease, 1, s.objects);
  return s;
}

}  // namespace tally::bpf
