#include "enforce/plan.h"

namespace tally::enforce {

Plan plan(const Bounds& declared, const Plan* parent, const KernelState& kernel) {
  Plan p;
  p.bound = declared.gpu;
  // Once the kernel charges GTT to memcg, MemoryMax bounds host memory and
  // GTT together, so gpu_memory_max only reports unless the operator keeps it.
  p.advisory = kernel.gttCharged && !kernel.keepGpuMemoryMax && p.bound.max.has_value();
  // A child is held to the smaller of its own max and its parent's; one that
  // declared no max takes the parent's action and pace with it, and a
  // parent's max keeps the parent's advisory state.
  if (parent && parent->bound.max && (!p.bound.max || *parent->bound.max < *p.bound.max)) {
    if (!p.bound.max) {
      p.bound.action = parent->bound.action;
      p.bound.consecutive = parent->bound.consecutive;
    }
    p.bound.max = parent->bound.max;
    p.advisory = parent->advisory;
  }
  if (p.advisory) p.bound.action = Action::Report;

  p.memoryMax = declared.memoryMax;
  if (kernel.gttCharged && declared.memoryMax && declared.gpu.max) {
    p.memoryMax = *declared.memoryMax + *declared.gpu.max;
    p.memoryMaxWithGpu = true;
  }

  if (kernel.chargeRefuses && p.bound.max && refusesInKernel(p.bound.action))
    p.kernelLimit = p.bound.max;
  return p;
}

}  // namespace tally::enforce
