// `tally config suggest`: a config's pools from what this host holds, as
// `slurmd -C` prints a node's line from its hardware. Pure: the host's
// figures in (the CLI reads them from one host snapshot), TOML out, every
// figure commented with where it came from. Nothing is declared until the
// operator installs it; `tally config check` takes the output as it is.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "util/result.h"

namespace tally::config {

struct HostFigures {
  std::optional<std::uint64_t> memTotal;  // /proc/meminfo MemTotal; absent: unreadable
  struct Gpu {
    std::string device;  // PCI address, as a pool's devices name it (else the DRM device's name)
    bool pci = true;     // false: a pool cannot name it; the pool then names no device (every GPU)
    // The GTT ceiling headroom measures against (the smaller known of
    // graphics and compute, devices/gtt_ceiling.h), and which one, in words;
    // absent: the device has no GTT region. VRAM's total; absent: no VRAM
    // region (never shown as 0: nothing was measured).
    std::optional<std::uint64_t> gttCeiling;
    std::string ceilingWords;
    std::optional<std::uint64_t> vramTotal;
  };
  std::vector<Gpu> gpus;
  std::vector<std::string> leftOut;  // devices with no usable figures, and why
};

struct SuggestOptions {
  std::uint64_t capacity = 4;            // leases a pool holds at once
  std::optional<std::uint64_t> reserve;  // kept from every budget; default: max(4 GiB, MemTotal/8)
};

// The budgets: GTT is system RAM, so the GPU budget (Σ GTT ceiling, at most
// MemTotal − reserve, + Σ VRAM) and the host memory budget (what is left of
// MemTotal − reserve) never together promise more RAM than there is. Each
// pool's default share is its budget over its capacity, so a bare
// `tally run --pool gpu` is granted. The error says what is missing.
Result<std::string> suggestConfig(const HostFigures& host, const SuggestOptions& o);

}  // namespace tally::config
