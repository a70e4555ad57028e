// The options the client commands share: where the daemon is, how long it
// has to answer, and a lease ID's check (cli/cmd_client.h).
#include <CLI/CLI.hpp>
#include <string>

#include "cli/cmd_client.h"

namespace tally::cli {

void addSocketOption(CLI::App* cmd, std::string& socket) {
  cmd->add_option("--socket", socket,
                  "the daemon's socket (default: $TALLY_SOCKET, else the socket in "
                  "/etc/tally/tally.toml, else /run/tally/tally.sock)");
}

void addReplyTimeoutOption(CLI::App* cmd, std::string& timeout) {
  cmd->add_option("--timeout", timeout,
                  "how long the daemon has to answer (exit 3 if it does not; a queued request\n"
                  "then waits for its grant under the queue's own timeout)")
      ->default_str("10s");
}

// An empty ID would match the ledger's rows that belong to no lease.
const CLI::Validator kNonEmptyLeaseId(
    [](std::string& id) {
      return id.empty() ? std::string("a lease id is required (tally leases lists them)")
                        : std::string();
    },
    "");

}  // namespace tally::cli
