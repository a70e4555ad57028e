// One line of text for the operator's terminal that carries what clients and
// the kernel said (names, units, cgroup paths, summaries, attributes):
// printed printable (util/clean_text.h), so a terminal shows it and never
// obeys it. JSON output needs none of this (its encoder escapes).
#pragma once

#include <fmt/format.h>

#include <string_view>

#include "util/clean_text.h"

namespace tally::cli {

inline void printLine(std::string_view line) { fmt::print("{}\n", text::printable(line)); }

}  // namespace tally::cli
