#include "enforce/cadence.h"

#include <algorithm>

namespace tally::enforce {

bool nearBound(const Cadence& c, std::optional<std::uint64_t> max,
               std::optional<std::uint64_t> last, std::optional<std::uint64_t> previous,
               std::uint64_t elapsedUs) {
  if (!max || !last || c.marginPercent == 0) return false;
  // A bound of 0 (no GPU memory: a Slurm job without the GRES) is near only
  // once something is held; else every such lease would be sampled fast
  // for its whole life and take the fast slots from leases really near.
  if (*max == 0) return *last > 0;
  // The line: max less the margin, in integers (no overflow: max / 100 first).
  const std::uint64_t margin = *max / 100 * c.marginPercent + *max % 100 * c.marginPercent / 100;
  const std::uint64_t line = *max > margin ? *max - margin : 0;
  if (*last >= line) return true;
  if (!previous || *last <= *previous || elapsedUs == 0) return false;
  // Rising: at this rate, how far by the next normal sample? (long double:
  // a rate times an interval may pass 2^64 for a huge jump.)
  const long double rate = static_cast<long double>(*last - *previous) / elapsedUs;
  const long double projected = static_cast<long double>(*last) + rate * c.normalUs;
  return projected >= static_cast<long double>(line);
}

std::uint64_t nextSampleDelayUs(const Cadence& c, std::optional<std::uint64_t> max,
                                std::optional<std::uint64_t> last,
                                std::optional<std::uint64_t> previous, std::uint64_t elapsedUs) {
  return nearBound(c, max, last, previous, elapsedUs) ? c.nearUs : c.normalUs;
}

std::uint64_t Pace::sampled(const Cadence& c, std::optional<std::uint64_t> max,
                            std::optional<std::uint64_t> bytes, std::uint64_t nowUs) {
  const std::uint64_t elapsed = lastUs ? nowUs - lastUs : 0;
  near = nearBound(c, max, bytes, previousBytes, elapsed);
  previousBytes = bytes;
  lastUs = nowUs;
  nextUs = nowUs + (near ? c.nearUs : c.normalUs);
  return elapsed ? std::max<std::uint64_t>(elapsed / 1000, 1) * 1000 : c.normalUs;
}

}  // namespace tally::enforce
