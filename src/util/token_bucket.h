// A token bucket: `burst` takes at once, then one more per `refillUs`. Pure
// (the caller passes the time), so tests drive it without waiting.
#pragma once

#include <algorithm>
#include <cstdint>

namespace tally {

class TokenBucket {
 public:
  TokenBucket(unsigned burst = 1, std::uint64_t refillUs = 1'000'000)
      : burst_(burst), refillUs_(refillUs ? refillUs : 1), tokens_(burst) {}
  // Takes one token at monotonic time `nowUs`; false (and nothing taken) when empty.
  bool take(std::uint64_t nowUs) {
    if (at_ && nowUs > at_) {
      tokens_ = std::min<double>(
          burst_, tokens_ + static_cast<double>(nowUs - at_) / static_cast<double>(refillUs_));
    }
    at_ = nowUs;
    if (tokens_ < 1.0) return false;
    tokens_ -= 1.0;
    return true;
  }

 private:
  unsigned burst_;
  std::uint64_t refillUs_;
  double tokens_;
  std::uint64_t at_ = 0;
};

}  // namespace tally
