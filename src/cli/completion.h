// zsh and fish completion, written from the command line's own model (every
// subcommand, option and help text CLI11 knows), so they cannot drift from
// --help. bash completion is hand-written (dist/tally.bash): it also completes
// values the daemon names (pools, lease ids).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace tally::cli {

std::string fishCompletion(const CLI::App& app);
std::string zshCompletion(const CLI::App& app);

}  // namespace tally::cli
