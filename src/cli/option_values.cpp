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

bool attributesOption(std::string_view cmd, const std::vector<std::string>& texts, lease::Attributes& out) {
  if (texts.size() > lease::kMaxAttributes) {
    fmt::print(stderr, "tally {}: --attr: at most {} attributes per lease\n", cmd, lease::kMaxAttributes);
    return false;
  }
  for (const auto& t : texts) {
    auto kv = lease::parseAttribute(t);
    if (!kv) {
      fmt::print(stderr, "tally {}: --attr: {}\n", cmd, kv.error().message);
      return false;
    }
    out[kv->first] = kv->second;
  }
  return true;
}

}  // namespace tally::cli
