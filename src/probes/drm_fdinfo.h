// Parser for the DRM part of /proc/<pid>/fdinfo/<fd> (drm-usage-stats), plus
// amdgpu's legacy keys: `drm-memory-<r>`, `pasid:`, `amd-*`, and the 5.14
// format (`pdev:`, `gtt mem:\tN kB`, `vram mem:`, `cpu mem:`). Pure: text in,
// typed value out. All sizes are bytes (raw integer units inside).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tally::probes {

// Figures one fdinfo prints for one memory region, in bytes, each as printed
// under its own key. Nothing is derived here; see residentOf().
struct RegionStats {
  std::optional<std::uint64_t> total;      // drm-total-<r>
  std::optional<std::uint64_t> shared;     // drm-shared-<r>
  std::optional<std::uint64_t> resident;   // drm-resident-<r>
  std::optional<std::uint64_t> purgeable;  // drm-purgeable-<r>
  std::optional<std::uint64_t> active;     // drm-active-<r>
  std::optional<std::uint64_t> memory;     // drm-memory-<r> (deprecated alias of resident)
  std::optional<std::uint64_t> legacy514;  // "<r> mem:" (amdgpu, 5.14-5.18)
};

enum class ResidentSource { kDrmResident, kDrmMemory, kAmdgpu514 };
const char* toString(ResidentSource s);

// The one resident figure of a region. The same bytes can be printed under up
// to three keys (amdgpu prints drm-resident-gtt *and* drm-memory-gtt); the rule
// picks exactly one so a region is never counted twice: drm-resident-<r>, else
// drm-memory-<r>, else the 5.14 "<r> mem:" form.
struct RegionResident {
  std::uint64_t bytes = 0;
  ResidentSource source = ResidentSource::kDrmResident;
};
std::optional<RegionResident> residentOf(const RegionStats& r);

struct EngineStats {
  std::optional<std::uint64_t> busyNs;       // drm-engine-<e>: N ns
  std::optional<std::uint64_t> cycles;       // drm-cycles-<e>
  std::optional<std::uint64_t> totalCycles;  // drm-total-cycles-<e>
  std::optional<std::uint64_t> maxfreqHz;    // drm-maxfreq-<e>
  std::optional<std::uint64_t> capacity;     // drm-engine-capacity-<e> (absent means 1)
};

struct LineIssue {
  unsigned line = 0;  // 1-based
  std::string reason;
};

struct DrmFdinfo {
  std::string driver;  // drm-driver; empty when absent (5.14 format, partial samples)
  std::optional<std::string> pdev;
  std::optional<std::uint64_t> clientId;
  std::optional<std::string> clientName;
  std::optional<std::uint64_t> pasid;
  // Few regions and engines per file: flat vectors in first-seen order beat maps.
  std::vector<std::pair<std::string, RegionStats>> regions;
  std::vector<std::pair<std::string, EngineStats>> engines;
  std::vector<std::pair<std::string, std::uint64_t>> amd;  // amd-* sizes, bytes
  std::vector<LineIssue> rejected;  // malformed lines, skipped without aborting the file

  // True when the file carries any DRM usage key (drm-* or the amdgpu forms):
  // the fd belongs to a driver that reports usage stats.
  bool hasUsageStats = false;

  const RegionStats* region(std::string_view name) const;
  const EngineStats* engine(std::string_view name) const;
};

DrmFdinfo parseDrmFdinfo(std::string_view text);

// A size as drm-usage-stats prints it: "N" (bytes), "N KiB", "N MiB", and the
// legacy "N kB" (= KiB). Any amount of blanks before the unit. Unknown units
// and values overflowing u64 are rejected (nullopt).
std::optional<std::uint64_t> parseDrmSize(std::string_view value);

}  // namespace tally::probes
