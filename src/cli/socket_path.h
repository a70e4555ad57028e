// Which daemon a client command talks to.
#pragma once

#include <string>

namespace tally::cli {

// --socket when given; else $TALLY_SOCKET; else the [daemon] socket of
// /etc/tally/tally.toml when that file exists and parses; else
// /run/tally/tally.sock. (The CLI reads the daemon's config; the RPC client
// knows only the path it is handed.)
std::string socketPath(const std::string& option);

}  // namespace tally::cli
