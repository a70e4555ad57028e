#pragma once

#include <cstdint>

namespace tally::contain {

// How long a stopping lease's processes have between SIGTERM and SIGKILL,
// whoever stops them: systemd (the scope's TimeoutStopUSec), the daemon
// (cgroup.kill after it, daemon/lease.h), tally run (waiting for both).
inline constexpr std::uint64_t kStopGraceUs = 10'000'000;

}  // namespace tally::contain
