#include "cli/option_values.h"

#include <fmt/format.h>
#include <unistd.h>

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
  long page = ::sysconf(_SC_PAGESIZE);
  auto min = static_cast<std::uint64_t>(page > 0 ? page : 4096);
  if (out && *out < min) {
    // memory.max counts in pages: the kernel reads 1 as 0 and the workload is
    // OOM-killed before it can exec. Refused, not applied.
    fmt::print(stderr,
               "tally {}: {} {} is below one page ({} bytes): the kernel would round it down to 0 "
               "and kill the workload "
               "before it starts; give at least {} (e.g. 64M)\n",
               cmd, flag, text, min, min);
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
