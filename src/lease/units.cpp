#include "lease/units.h"

#include <fmt/format.h>

#include <cctype>

#include "util/text.h"

namespace tally::lease {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Splits "<digits><suffix>" with optional blanks between them.
bool splitNumber(std::string_view text, std::string_view& digits, std::string_view& suffix) {
  std::size_t i = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
  digits = text.substr(0, i);
  suffix = text::trim(text.substr(i));
  return !digits.empty();
}

}  // namespace

Result<std::uint64_t> parseSize(std::string_view text) {
  std::string_view t = text::trim(text);
  std::string_view digits, suffix;
  if (!splitNumber(t, digits, suffix)) {
    return Error{0, fmt::format("'{}' is not a size: give bytes or a number with K, M, G or T (1024-based), e.g. 64M", text)};
  }
  auto n = text::parseU64(digits);
  if (!n) return Error{0, fmt::format("'{}' is too large for a 64-bit byte count", text)};
  std::string s = lower(suffix);
  unsigned shift = 0;
  if (s.empty() || s == "b") shift = 0;
  else if (s == "k" || s == "kb" || s == "ki" || s == "kib") shift = 10;
  else if (s == "m" || s == "mb" || s == "mi" || s == "mib") shift = 20;
  else if (s == "g" || s == "gb" || s == "gi" || s == "gib") shift = 30;
  else if (s == "t" || s == "tb" || s == "ti" || s == "tib") shift = 40;
  else return Error{0, fmt::format("'{}': unknown size unit '{}' (use K, M, G or T, 1024-based; KiB spellings work too)", text, suffix)};
  auto bytes = text::mulU64(*n, std::uint64_t{1} << shift);
  if (!bytes) return Error{0, fmt::format("'{}' is too large for a 64-bit byte count", text)};
  return *bytes;
}

Result<std::uint64_t> parseDurationUs(std::string_view text) {
  std::string_view t = text::trim(text);
  std::string_view digits, suffix;
  if (!splitNumber(t, digits, suffix)) {
    return Error{0, fmt::format("'{}' is not a duration: give e.g. 500ms, 1s or 2m", text)};
  }
  auto n = text::parseU64(digits);
  std::string s = lower(suffix);
  std::uint64_t unit = 0;
  if (s == "us") unit = 1;
  else if (s == "ms") unit = 1000;
  else if (s.empty() || s == "s") unit = 1000000;
  else if (s == "m" || s == "min") unit = 60000000;
  else return Error{0, fmt::format("'{}': unknown duration unit '{}' (use us, ms, s or m)", text, suffix)};
  auto us = n ? text::mulU64(*n, unit) : std::nullopt;
  if (!us) return Error{0, fmt::format("'{}' is too long a duration", text)};
  return *us;
}

}  // namespace tally::lease
