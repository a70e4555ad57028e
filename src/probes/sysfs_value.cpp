#include "probes/sysfs_value.h"

#include <limits>

#include "util/text.h"

namespace tally::probes {

std::optional<std::uint64_t> parseSysfsU64(std::string_view text) {
  return text::parseU64(text::trim(text));
}

std::optional<std::int64_t> parseSysfsI64(std::string_view text) {
  return text::parseI64(text::trim(text));
}

std::optional<DevNumber> parseDevNumber(std::string_view input) {
  input = text::trim(input);
  auto colon = input.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  auto major = text::parseU64(input.substr(0, colon));
  auto minor = text::parseU64(input.substr(colon + 1));
  constexpr auto kMax = std::numeric_limits<std::uint32_t>::max();
  if (!major || !minor || *major > kMax || *minor > kMax) return std::nullopt;
  return DevNumber{static_cast<std::uint32_t>(*major), static_cast<std::uint32_t>(*minor)};
}

}  // namespace tally::probes
