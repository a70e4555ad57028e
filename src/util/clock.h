// The two clocks tally reads: wall time for records, monotonic for intervals.
#pragma once

#include <time.h>

#include <cstdint>

namespace tally::clock {

inline std::uint64_t readNs(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull +
         static_cast<std::uint64_t>(ts.tv_nsec);
}
inline std::uint64_t realtimeNs() { return readNs(CLOCK_REALTIME); }
inline std::uint64_t monotonicUs() { return readNs(CLOCK_MONOTONIC) / 1000u; }

}  // namespace tally::clock
