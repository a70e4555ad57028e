// bash, zsh and fish completion, written from the command line's own model
// (every subcommand, option and help text CLI11 knows), so they cannot drift
// from --help. bash also completes the values of options checked against a
// set, and values the host or the daemon names (units, pools, lease ids).
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <string>
#include <vector>

namespace tally::cli {

// Option values CLI11 does not check itself (the command checks them, with its
// own words), by long name: "kind" -> the event kinds.
using Enumerations = std::map<std::string, std::vector<std::string>>;

std::string bashCompletion(const CLI::App& app, const Enumerations& enums);
std::string fishCompletion(const CLI::App& app);
std::string zshCompletion(const CLI::App& app);

// tally(1) from its prose (dist/tally.1.in) and the same model: the
// template's @TALLY_MAN_SYNOPSIS@, @TALLY_MAN_COMMANDS@ and
// @TALLY_MAN_EXIT_STATUS@ lines become every command with its description,
// each option with its help and its footer, and the exit code table
// (cli/exit_codes.h), in roff. The page cannot drift from --help.
std::string manPage(const CLI::App& app, const std::string& templateText);

}  // namespace tally::cli
