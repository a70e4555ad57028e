// Operator-facing units at the edge, both ways: sizes ("64M"; "1.5GiB" is not
// accepted: integers only) and durations ("250ms", "2s") parsed into raw
// integers, and raw integers shown as a person reads them. Inside tally every
// figure stays a raw integer (bytes, µs); these are the only conversions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "util/result.h"

namespace tally::units {

// Bytes from "<integer>[unit]" where unit is K, M, G, T (1024-based) in the
// spellings K, KB, Ki, KiB (any case), or B / nothing for bytes. "infinity" is
// not a size: a limit nobody wants is simply not declared.
Result<std::uint64_t> parseSize(std::string_view text);

// Microseconds from "<integer>(us|ms|s|m|min|h|d)", or several such parts
// separated by spaces and summed ("1h 30min"); a bare integer is seconds.
Result<std::uint64_t> parseDurationUs(std::string_view text);

// "512 B", "1.5 KiB", "40.0 GiB": 1024-based, one decimal.
std::string humanBytes(std::uint64_t bytes);
// "30d", "1h 30min", "250ms", "1ms 500us": systemd's timespan words
// (systemd.time(7)), exact, largest unit first, no zero parts; "0" for none.
// parseDurationUs reads it back.
std::string humanDuration(std::uint64_t us);
// humanDuration to the whole second (an uptime, an age): "4d 1h 55min 11s".
std::string roughDuration(std::uint64_t us);

}  // namespace tally::units
