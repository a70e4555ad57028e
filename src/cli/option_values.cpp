#include "cli/option_values.h"

#include <fmt/format.h>

#include "lease/limits_rule.h"
#include "util/units.h"

namespace tally::cli {
namespace {

template <typename Parse>
bool optionValue(std::string_view cmd, std::string_view flag, const std::string& text,
                 std::optional<std::uint64_t>& out, Parse parse) {
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

bool sizeOption(std::string_view cmd, std::string_view flag, const std::string& text,
                std::optional<std::uint64_t>& out) {
  return optionValue(cmd, flag, text, out,
                     [](const std::string& t) { return units::parseSize(t); });
}

bool memoryLimitOption(std::string_view cmd, std::string_view flag, const std::string& text,
                       std::optional<std::uint64_t>& out) {
  if (!sizeOption(cmd, flag, text, out)) return false;
  // Refused, not applied: the kernel would kill the workload before it starts.
  if (auto s = lease::checkLimits({out, std::nullopt, std::nullopt}, {flag, "", ""}); !s) {
    fmt::print(stderr, "tally {}: {}\n", cmd, s.error().message);
    return false;
  }
  return true;
}

bool gpuLimitsOption(std::string_view cmd, const std::optional<std::uint64_t>& max,
                     const std::optional<std::uint64_t>& high) {
  if (auto s = lease::checkLimits({std::nullopt, max, high}, lease::kCliLimitNames); !s) {
    fmt::print(stderr, "tally {}: {}\n", cmd, s.error().message);
    return false;
  }
  return true;
}

bool durationOption(std::string_view cmd, std::string_view flag, const std::string& text,
                    std::optional<std::uint64_t>& out) {
  return optionValue(cmd, flag, text, out,
                     [](const std::string& t) { return units::parseDurationUs(t); });
}

bool attributesOption(std::string_view cmd, const std::vector<std::string>& texts,
                      lease::Attributes& out) {
  if (texts.size() > lease::kMaxAttributes) {
    fmt::print(stderr, "tally {}: --attr: at most {} attributes per lease\n", cmd,
               lease::kMaxAttributes);
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
