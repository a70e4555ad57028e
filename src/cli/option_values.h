// Optional size and duration options of the CLI ("48G", "30s"): one place
// that parses them and says what is wrong as "tally <cmd>: <flag> <why>".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lease/attributes.h"

namespace tally::cli {

// "" leaves `out` unset (the option was not given) and returns true; a value
// that does not parse is printed on stderr and returns false.
bool sizeOption(std::string_view cmd, std::string_view flag, const std::string& text,
                std::optional<std::uint64_t>& out);
// A memory limit (--memory-max, --memory-high): a size of at least one page.
bool memoryLimitOption(std::string_view cmd, std::string_view flag, const std::string& text,
                       std::optional<std::uint64_t>& out);
// --gpu-memory-max and --gpu-memory-high together (lease/limits_rule.h); a refusal is printed.
bool gpuLimitsOption(std::string_view cmd, const std::optional<std::uint64_t>& max,
                     const std::optional<std::uint64_t>& high);
bool durationOption(std::string_view cmd, std::string_view flag, const std::string& text,
                    std::optional<std::uint64_t>& out);
// Every --attr KEY=VALUE (lease/attributes.h) into `out`; a bad one is printed and returns false.
bool attributesOption(std::string_view cmd, const std::vector<std::string>& texts,
                      lease::Attributes& out);

}  // namespace tally::cli
