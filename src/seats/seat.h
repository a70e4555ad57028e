// A seat row: one lease as a coordinator's seat meter shows it (pure). What
// the row says is measured, declared, or absent with the reason; a row whose
// last sample is older than twice the sample interval is stale and carries no
// measured figures at all, never the last value passed off as current.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "devices/memory_class.h"
#include "lease/attributes.h"

namespace tally::seats {

// A figure with the reason it is missing (doctrine 1: absent, never 0).
struct Figure {
  std::optional<std::uint64_t> bytes;
  std::string unknown;  // why bytes is absent; empty when present
  static Figure of(std::optional<std::uint64_t> v, std::string whyNot) {
    return v ? Figure{v, {}} : Figure{std::nullopt, std::move(whyNot)};
  }
};

struct RegionFigures {
  std::optional<std::uint64_t> currentBytes, peakBytes;
  // What the region's bytes are (devices/memory_class.h); a class GPU
  // memory does not count is said so, with the reason, beside its bytes.
  std::optional<devices::MemoryClass> memoryClass;
};

// Everything a row is built from, gathered by the daemon at one instant.
struct SeatFacts {
  std::string lease, name, kind, state;  // kind run|attach; state queued|granted|running
  std::string waiting;  // queued: what it waits for, in one line (admission::waitFigures)
  std::vector<std::string> pools;
  std::string parent;       // a child lease's parent lease id ("" = none)
  std::uint32_t owner = 0;  // the uid that asked for it (the peer at the daemon's socket)
  // The workload: the unit systemd runs it as, its cgroup, and the container
  // recognised from the cgroup path (podman:…, docker:…, k8s-pod:…).
  std::string unit, cgroup;
  std::optional<std::string> container;
  // cgroup.events "populated", read for this row; absent with the reason.
  std::optional<bool> populated;
  std::string populatedUnknown;
  // The meter's last sample: when, and what it read.
  std::optional<std::uint64_t> observedAtNs;
  Figure hostCurrent, hostPeak, hostMax;  // memory.current at the sample, memory.peak, memory.max
  std::map<std::string, RegionFigures> gpuRegions;  // gtt, vram (and others the driver prints)
  Figure gpuCurrent;                                // gtt + vram, the figure gpu_memory_max bounds
  std::optional<std::uint64_t> gpuPeakBytes;
  std::string gpuSource = "drm-fdinfo";
  // The kernel charge (bpf/), where the lease is armed: fdinfo's sum shown
  // beside the charge, and the allocations refused at its bound.
  bool kernelCharged = false;
  std::optional<std::uint64_t> gpuFdinfoBytes;
  std::uint64_t gpuRefused = 0, gpuRefusedBytes = 0;
  std::vector<std::string> devices;  // device keys (PCI BDF) the lease's DRM clients use
  // Declared by the operator.
  std::optional<std::uint64_t> memoryMax, gpuMemoryMax, gpuMemoryHigh;
  lease::Attributes attributes;
};

// fresh: observed within 2 x the sample interval before `nowNs`.
bool isFresh(const std::optional<std::uint64_t>& observedAtNs, std::uint64_t nowNs,
             std::uint64_t intervalUs);

nlohmann::json seatRow(const SeatFacts& f, std::uint64_t nowNs, std::uint64_t intervalUs);

}  // namespace tally::seats
