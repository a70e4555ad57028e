// The charge probe's child: a process in the probe's cgroup that opens one
// path's node and allocates on it, one step per command from the parent,
// and the parent's side of that conversation. Internal to the probe
// (charge_probe.cpp).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>

#include "coverage/charge_probe_plan.h"

namespace tally::coverage::charge_probe {

// Reads one-byte commands from `in` until told to exit: 'o' opens the
// path's node, 'a' allocates `bytes` on it; each reply (an fd or 0, else
// -errno) is written to `out` as an int32.
[[noreturn]] void child(int in, int out, const Plan& plan, std::uint64_t bytes);

// The child's next reply, or none within `timeoutMs`.
std::optional<std::int32_t> await(int fd, int timeoutMs);

// The child, once told to go: waited for, and killed when it does not end
// in `ms` (stuck in a driver's ioctl, say).
void reap(pid_t pid, int ms);

}  // namespace tally::coverage::charge_probe
