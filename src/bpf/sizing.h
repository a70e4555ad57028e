// How large the kernel charge's maps are made, from the host and the
// daemon's limits (docs/enforcement.md, "Room"). Pure: the daemon, its
// privileged loader and doctor compute the same.
//
// Objects: the object map holds one entry per buffer object an armed lease
// created. A box's GPU memory bounds how many live buffers can matter, so the
// map grows with it: kObjectsPerGiB entries per GiB of GTT + VRAM (an average
// object of 64 KiB), at least kMinObjects, at most kMaxObjects (an entry costs
// about 100 bytes of kernel memory, allocated only when used). One lease may
// hold at most `objectsPerLease` of them (the daemon's
// kernel_objects_per_lease), so no lease can fill the map for the others.
//
// Leases: one entry per armed lease and per ended lease whose buffers live
// on; room for kLeaseSlotsPerWaiter times what the daemon admits at once
// (its queue and every pool's capacity), at least kMinLeases.
#pragma once

#include <cstdint>
#include <optional>

namespace tally::bpf {

struct Sizing {
  std::uint64_t objects = 0;          // the object map's entries
  std::uint64_t leases = 0;           // the lease and charge maps' entries
  std::uint64_t objectsPerLease = 0;  // one lease's object quota
};

inline constexpr std::uint64_t kObjectsPerGiB = 16384;
inline constexpr std::uint64_t kMinObjects = 1ULL << 20;
inline constexpr std::uint64_t kMaxObjects = 1ULL << 24;
inline constexpr std::uint64_t kLeaseSlotsPerWaiter = 4;
inline constexpr std::uint64_t kMinLeases = 16384;
inline constexpr std::uint64_t kMaxLeases = 1ULL << 20;
inline constexpr std::uint64_t kDefaultObjectsPerLease = 65536;

// `gpuMemoryBytes`: Σ GTT + VRAM of the host's devices (absent: unknown, the
// minimum); `admitted`: the daemon's max_queued + Σ pool capacity.
Sizing sizeMaps(std::optional<std::uint64_t> gpuMemoryBytes, std::uint64_t admitted,
                std::uint64_t objectsPerLease);

}  // namespace tally::bpf
