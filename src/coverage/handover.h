// The hand-over (docs/coverage.md): once the kernel charges GTT to memcg, a
// lease's MemoryMax bounds host memory and GTT both, so tally changes what it
// does. Every rule that depends on it lives here, once. Pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "coverage/coverage.h"
#include "enforce/plan.h"

namespace tally::coverage {

struct Handover {
  Coverage coverage = Coverage::HostOnly;
  bool keepGpuMemoryMax = false;  // [daemon] keep_gpu_memory_max
  // memory.stat names GPU bytes it charged (gpu_active: the TTM memcg series;
  // dmem: the dmem -> memcg route): a lease's meter reads memory.stat each
  // sample, and hostOnly() takes exactly those bytes off memory.current.
  bool statNamesGpu = false;

  bool gttCharged() const { return coverage == Coverage::HostAndGtt; }

  // The hand-over as a lease's enforcement plan reads it (enforce/plan.h:
  // the MemoryMax that holds host memory and GTT both, the advisory bound),
  // with what the kernel charge can do here.
  enforce::KernelState kernelState(bool chargeRefuses) const {
    return {gttCharged(), keepGpuMemoryMax, chargeRefuses};
  }

  // A lease's host memory without its GPU memory: memory.current less the
  // GPU bytes the kernel charged into it, so no byte is counted in both.
  // Where memory.stat names them (`statGpuBytes`: gpu_active + dmem), exactly
  // those -- VRAM the kernel charges through dmem included, which the GPU
  // figure counts as device memory. Otherwise, once the kernel charges GTT,
  // the lease's host-uncharged GPU memory (GTT and its kin,
  // gpumem/gpu_memory.h). Host-charged regions (shmem) never enter the GPU
  // figure, so nothing is taken for them. Absent when the split is unknown.
  std::optional<std::uint64_t> hostOnly(std::optional<std::uint64_t> memoryCurrent,
                                        std::optional<std::uint64_t> statGpuBytes,
                                        std::optional<std::uint64_t> hostUnchargedGpu) const {
    if (!memoryCurrent) return std::nullopt;
    auto minus = [&](std::uint64_t b) { return *memoryCurrent > b ? *memoryCurrent - b : 0; };
    if (statNamesGpu) {
      if (!statGpuBytes) return std::nullopt;
      return minus(*statGpuBytes);
    }
    if (!gttCharged()) return memoryCurrent;
    if (!hostUnchargedGpu) return std::nullopt;
    return minus(*hostUnchargedGpu);
  }

  // What tally does differently on this coverage, in a sentence (the
  // ledger's coverage row and the journal say it at every start).
  std::string whatTallyDoes() const {
    if (!gttCharged())
      return "tally bounds GTT itself: gpu_memory_max kills, MemoryMax bounds host memory only";
    return std::string(
               "budgets and headroom stop adding fdinfo GTT to host memory; tally run maps "
               "--gpu-memory-max onto "
               "MemoryMax; gpu_memory_max ") +
           (keepGpuMemoryMax ? "still kills (keep_gpu_memory_max)"
                             : "is advisory (reports, never kills)");
  }
};

}  // namespace tally::coverage
