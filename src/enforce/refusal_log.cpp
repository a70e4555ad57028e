#include "enforce/refusal_log.h"

#include <fmt/format.h>

#include <algorithm>

#include "util/units.h"

namespace tally::enforce {

void RefusalLog::add(const Refusal& r) {
  ++count_;
  bytes_ += r.askedBytes;
  if (r.failsafe) {
    ++failsafe_;
    lastFailsafe_ = r;
  }
  last_ = r;
}

BoundEvent RefusalLog::say(std::uint64_t limit, std::uint64_t monoUs, std::uint64_t nowNs) {
  BoundEvent e;
  e.atNs = nowNs;
  e.kind = Verdict::Refused;
  e.bytes = bytes_;
  e.limit = limit;
  e.samples = static_cast<unsigned>(std::min<std::uint64_t>(count_, 1'000'000));
  e.summary = fmt::format(
      "{} GPU allocation{} ({}) refused in the kernel at gpu_memory_max {}: the last asked {} "
      "with {} held (pid {}); the lease runs on",
      count_, count_ == 1 ? "" : "s", units::humanBytes(bytes_), units::humanBytes(limit),
      units::humanBytes(last_.askedBytes), units::humanBytes(last_.heldBytes), last_.pid);
  if (failsafe_)
    e.summary += fmt::format(
        "; {} of them refused failing closed, not at the bound (the last: {}): the kernel could "
        "not charge them exactly (tally doctor, docs/enforcement.md)",
        failsafe_, lastFailsafe_.why);
  count_ = bytes_ = failsafe_ = 0;
  lastSaidUs_ = monoUs;
  return e;
}

}  // namespace tally::enforce
