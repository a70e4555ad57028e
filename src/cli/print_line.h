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

// A rendered table or report, many lines: each printed as printLine prints
// one (its newlines kept, whatever else a process name or a cgroup path
// carried shown escaped). What `tally gpu` and `tally doctor` print, whose
// cells come from /proc and cgroupfs, where any local user names things.
inline void printBlock(std::string_view block) {
  while (!block.empty()) {
    auto nl = block.find('\n');
    if (nl == std::string_view::npos) {
      fmt::print("{}", text::printable(block));
      return;
    }
    printLine(block.substr(0, nl));
    block.remove_prefix(nl + 1);
  }
}

}  // namespace tally::cli
