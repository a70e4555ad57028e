// How one lease's bounds are enforced, decided once (docs/enforcement.md).
// Pure: what the lease declared, its parent's plan (a child lease), the
// kernel's hand-over state and what the kernel charge can do here go in;
// the plan comes out. The daemon's sampler and placement and tally run's
// runner execute a plan; none of them decides one.
//
//   MemoryMax        what was declared, or --memory-max + --gpu-memory-max once
//                    the kernel charges GTT to memcg (both then count in
//                    memory.current)
//   the GPU bound    the declared one, or, for a child, its parent's when that
//                    is smaller (with the parent's action when the child
//                    declared no max); advisory (report only) once the kernel
//                    charges GTT and the operator did not keep gpu_memory_max
//   the kernel limit where the kernel charge refuses allocations (bpf/):
//                    gpu_memory_max, for a bound whose action is refuse
//   the pace         near its bound a lease is sampled fast, but only while
//                    its bound can still kill
#pragma once

#include <cstdint>
#include <optional>

#include "enforce/gpu_bound.h"

namespace tally::enforce {

// What a lease declared, as enforcement reads it (lease::Declaration's
// limits and GPU bound: lease::boundsOf).
struct Bounds {
  std::optional<std::uint64_t> memoryMax;
  GpuBound gpu;  // max, high, the declared action, over-samples, the sample interval
};

// The kernel's hand-over state (coverage::Handover::kernelState makes it
// from the coverage verdict) and what the kernel charge can do here.
struct KernelState {
  bool gttCharged = false;        // memcg charges GTT: MemoryMax holds host memory and GTT
  bool keepGpuMemoryMax = false;  // [daemon] keep_gpu_memory_max: the bound still acts
  bool chargeRefuses = false;     // the kernel charge is loaded: it refuses allocations
};

struct Plan {
  // The MemoryMax the lease's cgroup holds (absent: none declared), and
  // whether it is the hand-over's sum rather than --memory-max alone.
  std::optional<std::uint64_t> memoryMax;
  bool memoryMaxWithGpu = false;
  // The sampled GPU bound as enforced: its max (a child's may be its
  // parent's), high, action (report when advisory) and over-samples.
  GpuBound bound;
  bool advisory = false;
  // The limit the kernel charge refuses allocations at (absent: the
  // kernel only meters this lease).
  std::optional<std::uint64_t> kernelLimit;

  // The bound can kill: a lease already over it when attached would be killed on arrival.
  bool killsOverMax() const { return bound.max && killsOverBound(bound.action); }
  // The max a lease's pace nears (enforce/cadence.h), absent for the normal
  // pace: fast sampling exists to kill sooner, so a bound that will not kill
  // (report only, or its kill already done) is sampled at the normal interval.
  std::optional<std::uint64_t> pacedMax(const GpuBoundState& state) const {
    if (!killsOverBound(bound.action) || state.acted) return std::nullopt;
    return bound.max;
  }
};

// The one decision. `parent`: the plan of the lease a child nests in (null
// for a top-level lease).
Plan plan(const Bounds& declared, const Plan* parent, const KernelState& kernel);

}  // namespace tally::enforce
