// Parser for /proc/meminfo ("Key:   N kB" lines). Values in bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace tally::probes {

struct MemInfo {
  std::optional<std::uint64_t> memTotal;
  std::optional<std::uint64_t> memAvailable;
  std::optional<std::uint64_t> gpuActive;   // GPUActive: (Linux >= 7.1), global TTM pages
  std::optional<std::uint64_t> gpuReclaim;  // GPUReclaim:
};

MemInfo parseMemInfo(std::string_view text);

// "N kB" (meminfo's unit, = KiB) or a bare "N" (bytes, as the HugePages_* lines).
std::optional<std::uint64_t> parseMemInfoValue(std::string_view value);

}  // namespace tally::probes
