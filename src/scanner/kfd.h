// KFD (ROCm compute) sysfs: which device number /dev/kfd has, which processes
// KFD knows, and their per-GPU VRAM: /sys/class/kfd/kfd/proc/<pid>/vram_<gpuid>
// for the process's primary context and, on newer kernels, .../context_<id>/
// vram_<gpuid> for each secondary one. vram_<gpuid> counts the allocations
// flagged VRAM only: GTT that ROCm allocates is not in it (it shows in the
// render node's fdinfo, drm-*-gtt, when KFD uses that node's VM).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fs/root.h"
#include "probes/sysfs_value.h"

namespace tally::scanner {

struct KfdIndex {
  std::optional<probes::DevNumber> dev;  // /dev/kfd's major:minor (dynamic major)
  std::vector<pid_t> pids;               // sorted: processes with a KFD context
  // gpu_id -> PCI BDF from the topology, filled on first use.
  std::vector<std::pair<std::uint64_t, std::string>> gpuPdev;
  bool topologyRead = false;

  bool hasPid(pid_t pid) const;
};

// One directory listing for all ROCm processes; absent KFD gives an empty index.
KfdIndex readKfdIndex(const fs::Root& sys);

struct KfdVramEntry {
  std::uint64_t gpuId = 0;
  std::optional<std::uint64_t> context;  // absent: the primary context
  std::optional<std::string> pdev;
  std::uint64_t bytes = 0;
};
std::vector<KfdVramEntry> readKfdVram(const fs::Root& sys, KfdIndex& index, pid_t pid);

// "domain N" / "location_id N" from a topology node's properties file -> BDF.
std::optional<std::string> kfdPdevFromProperties(std::string_view properties);

}  // namespace tally::scanner
