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
  for (auto [name, v] :
       {std::pair{n.gpuMemoryMax, d.gpuMemoryMax}, std::pair{n.gpuMemoryHigh, d.gpuMemoryHigh}}) {
    if (v && *v == 0) {
      return Error{EINVAL, fmt::format("{} 0 would act on the lease at its first sample; declare "
                                       "a bound above 0, or none",
                                       name)};
    }
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
