// Operator-facing units at the edge: sizes ("64M", "1.5GiB" is not accepted:
// integers only) and durations ("250ms", "2s"), parsed into raw integers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "util/result.h"

namespace tally::lease {

// Bytes from "<integer>[unit]" where unit is K, M, G, T (1024-based) in the
// spellings K, KB, Ki, KiB (any case), or B / nothing for bytes. "infinity" is
// not a size: a limit nobody wants is simply not declared.
Result<std::uint64_t> parseSize(std::string_view text);

// Microseconds from "<integer>(us|ms|s|m|h|d)"; a bare integer is seconds.
Result<std::uint64_t> parseDurationUs(std::string_view text);

}  // namespace tally::lease
