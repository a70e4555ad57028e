// How soon the daemon samples a lease again (docs/enforcement.md, "Sampling
// near a bound"). Pure. A lease far from its gpu_memory_max is sampled at
// sample_interval; one within near_bound_margin of it, or rising fast enough
// to reach that line before the next normal sample, every near_bound_interval,
// so a lease that crosses its bound is seen over (and, after
// gpu_over_samples, killed) in a fraction of a second while far-from-bound
// leases cost what they always did. The false-kill guard (K consecutive
// samples over) is unchanged: faster samples only make it shorter in time.
#pragma once

#include <cstdint>
#include <optional>

namespace tally::enforce {

struct Cadence {
  std::uint64_t normalUs = 1'000'000;  // sample_interval
  std::uint64_t nearUs = 50'000;       // near_bound_interval (<= normalUs)
  unsigned marginPercent = 10;         // near_bound_margin; 0 = never near
};

// Whether the lease is near its bound: `last` within the margin of `max`
// (or over it), or rising from `previous` (sampled `elapsedUs` before) at a
// rate that reaches the margin's line within one normal interval. An absent
// figure or no max: not near (nothing to be near to, nothing read).
bool nearBound(const Cadence& c, std::optional<std::uint64_t> max,
               std::optional<std::uint64_t> last, std::optional<std::uint64_t> previous,
               std::uint64_t elapsedUs);

// A lease's sampling clock, for tally run and the daemon alike: when it was
// last sampled (monotonic µs), its figure then, and when it is due again.
struct Pace {
  std::uint64_t lastUs = 0;  // 0: never sampled
  std::uint64_t nextUs = 0;
  std::optional<std::uint64_t> previousBytes;
  bool near = false;
  // A sample was taken at `nowUs` with figure `bytes` against `max` (absent:
  // no bound to be near): the next is due nearUs or normalUs later. Returns
  // the spacing this sample had, as a bound's message names it (whole ms, at
  // least 1; the normal interval for the first sample).
  std::uint64_t sampled(const Cadence& c, std::optional<std::uint64_t> max,
                        std::optional<std::uint64_t> bytes, std::uint64_t nowUs);
};

// The delay to the lease's next sample: nearUs when nearBound, else normalUs.
std::uint64_t nextSampleDelayUs(const Cadence& c, std::optional<std::uint64_t> max,
                                std::optional<std::uint64_t> last,
                                std::optional<std::uint64_t> previous, std::uint64_t elapsedUs);

}  // namespace tally::enforce
