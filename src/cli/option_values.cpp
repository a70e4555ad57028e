#include "cli/option_values.h"

#include <fmt/format.h>

#include "lease/units.h"

namespace tally::cli {
namespace {

template <typename Parse>
bool optionValue(std::string_view cmd, std::string_view flag, const std::string& text, std::optional<std::uint64_t>& out,
                 Parse parse) {
  if (text.empty()) return true;
  auto v = parse(text);
  if (!v) {
    fmt::print(stderr, "tally {}: {} {}\n", cmd, flag, v.error().message);
    return false;
  }
  out = *v;
  return true;
}

}  // namespace

bool sizeOption(std::string_view cmd, std::string_view flag, const std::string& text, std::optional<std::uint64_t>& out) {
  return optionValue(cmd, flag, text, out, [](const std::string& t) { return lease::parseSize(t); });
}

bool durationOption(std::string_view cmd, std::string_view flag, const std::string& text, std::optional<std::uint64_t>& out) {
  return optionValue(cmd, flag, text, out, [](const std::string& t) { return lease::parseDurationUs(t); });
}

}  // namespace tally::cli
