#include "lease/limits_rule.h"

#include <fmt/format.h>

#include <cerrno>

#include "util/units.h"

namespace tally::lease {

Status checkLimits(const DeclaredLimits& d, const LimitNames& n) {
  if (d.memoryMax && *d.memoryMax < kMinMemoryMax) {
    return Error{EINVAL,
                 fmt::format("{} {} bytes is below 1 MiB: no program starts in that (the kernel "
                             "OOM-kills it at once). Declare at least 1M, or no {} for no limit",
                             n.memoryMax, *d.memoryMax, n.memoryMax)};
  }
  // gpu_memory_max 0 is a bound: no GPU memory at all (every allocation
  // refused in the kernel; where fdinfo is the meter, the lease is killed
  // once it holds any). A Slurm site gives that to a job without the GRES
  // (slurm/step.h, no_gres=refuse). A high mark of 0 would throttle the lease
  // at its first sample, whatever it held: refused.
  if (d.gpuMemoryHigh && *d.gpuMemoryHigh == 0) {
    return Error{EINVAL, fmt::format("{} 0 would act on the lease at its first sample; declare "
                                     "a high mark above 0, or none",
                                     n.gpuMemoryHigh)};
  }
  if (d.gpuMemoryMax && d.gpuMemoryHigh && *d.gpuMemoryHigh > *d.gpuMemoryMax) {
    return Error{EINVAL,
                 fmt::format("{} {} is above {} {}: the lease would be killed before its high "
                             "mark is ever crossed. Declare the high mark at or below the max",
                             n.gpuMemoryHigh, units::humanBytes(*d.gpuMemoryHigh), n.gpuMemoryMax,
                             units::humanBytes(*d.gpuMemoryMax))};
  }
  return Ok{};
}

}  // namespace tally::lease
