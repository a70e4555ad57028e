// Parser for /proc/<pid>/stat: the start time, which with the PID identifies a
// process across PID reuse.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace tally::probes {

struct ProcStat {
  std::uint64_t startTimeTicks = 0;  // field 22, clock ticks since boot
  char state = '?';                  // field 3
};

// comm (field 2) may hold blanks and ')' itself: fields are counted from the
// *last* ')'. nullopt on any malformed input.
std::optional<ProcStat> parseProcStat(std::string_view text);

}  // namespace tally::probes
