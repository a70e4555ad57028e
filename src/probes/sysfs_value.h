// Parsers for single-value sysfs attributes and "MAJ:MIN" device numbers.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace tally::probes {

// "12345\n" -> 12345. Blank-trimmed, unsigned, within u64.
std::optional<std::uint64_t> parseSysfsU64(std::string_view text);
// "-1\n" -> -1 (amdgpu.gttsize prints a signed int).
std::optional<std::int64_t> parseSysfsI64(std::string_view text);

struct DevNumber {
  std::uint32_t major = 0;
  std::uint32_t minor = 0;
};
// "226:128\n" (sysfs `dev` attributes).
std::optional<DevNumber> parseDevNumber(std::string_view text);

}  // namespace tally::probes
