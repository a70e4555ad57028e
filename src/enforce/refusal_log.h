// The allocations the kernel charge refused for one lease (bpf/) that no
// event has said yet. Refusals can come thousands a second (a workload that
// retries), so they are gathered here and said as one gpu-bound event at
// most once per interval, and at the lease's end: nothing refused goes
// unsaid, and nothing is said twice. Pure: the daemon's sampler feeds it and
// records the event it makes.
#pragma once

#include <cstdint>
#include <string>

#include "enforce/gpu_bound.h"

namespace tally::enforce {

struct Refusal {
  std::uint64_t askedBytes = 0;  // what the allocation asked for
  std::uint64_t heldBytes = 0;   // what the lease held when it asked
  std::uint32_t pid = 0;
  // Refused failing closed (the kernel could not charge it exactly) rather
  // than at the bound; `why` names the reason (bpf::reasonName).
  bool failsafe = false;
  std::string why;
};

class RefusalLog {
 public:
  void add(const Refusal& r);
  bool unsaid() const { return count_ != 0; }
  // Unsaid refusals are due to be said at `monoUs`: the last event was said
  // `intervalUs` or longer ago (or none was).
  bool due(std::uint64_t monoUs, std::uint64_t intervalUs) const {
    return count_ && (!lastSaidUs_ || monoUs >= lastSaidUs_ + intervalUs);
  }
  // The event that says them all (kind Refused, at `nowNs`, against the
  // bound's `limit`), and the log is empty again, said at `monoUs`.
  BoundEvent say(std::uint64_t limit, std::uint64_t monoUs, std::uint64_t nowNs);

 private:
  std::uint64_t count_ = 0, bytes_ = 0, failsafe_ = 0;
  Refusal last_, lastFailsafe_;
  std::uint64_t lastSaidUs_ = 0;
};

}  // namespace tally::enforce
