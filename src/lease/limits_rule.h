// What limits a lease may declare, one rule for every way in (the RPC and
// so the config's [leases.*], tally run and attach, the Slurm plugin): a
// memory.max a program can start in, a GPU high mark above 0 (a
// gpu_memory_max of 0 is a bound: no GPU memory at all), and a high mark not
// above the max. Each refusal names the field as the caller spelled it.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "util/result.h"

namespace tally::lease {

// Below this memory.max no program starts (the kernel OOM-kills it before
// its first page fault is served); systemd accepts it, tally refuses it.
inline constexpr std::uint64_t kMinMemoryMax = 1ULL << 20;

struct LimitNames {
  std::string_view memoryMax, gpuMemoryMax, gpuMemoryHigh;
};
inline constexpr LimitNames kRpcLimitNames{"\"memory_max\"", "\"gpu_memory_max\"",
                                           "\"gpu_memory_high\""};
inline constexpr LimitNames kCliLimitNames{"--memory-max", "--gpu-memory-max", "--gpu-memory-high"};

struct DeclaredLimits {
  std::optional<std::uint64_t> memoryMax, gpuMemoryMax, gpuMemoryHigh;
};

Status checkLimits(const DeclaredLimits& d, const LimitNames& names);

}  // namespace tally::lease
