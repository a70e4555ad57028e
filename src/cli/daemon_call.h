// One call to the daemon for a client command: the --timeout, the
// connection, the typed request, and the errors printed with the command's
// name and mapped to tally's exit codes (cli/exit_codes.h).
#pragma once

#include <fmt/format.h>

#include <optional>

#include "cli/cmd_client.h"
#include "cli/exit_codes.h"
#include "cli/socket_path.h"
#include "rpc/client.h"
#include "util/result.h"

namespace tally::cli {

// --timeout as milliseconds for rpc::Client::call; nullopt after a usage error.
std::optional<int> replyTimeoutMs(const char* cmd, const ClientOptions& o);

// A reply that does not decode: the daemon and this client disagree.
int badReply(const char* cmd, const Error& e);

// One call; errors printed with the command's name. Exit code in `rc`.
template <class Params>
std::optional<rpc::Message> callDaemon(const char* cmd, const ClientOptions& o,
                                       const Params& params, int& rc,
                                       const rpc::Client::EventFn& onEvent = {}) {
  auto timeoutMs = replyTimeoutMs(cmd, o);
  if (!timeoutMs) {
    rc = kExitUsage;
    return std::nullopt;
  }
  std::string path = socketPath(o.socket);
  auto client = rpc::Client::connect(path);
  if (!client) {
    fmt::print(stderr, "tally {}: {}\n", cmd, client.error().message);
    rc = kExitEnvironment;
    return std::nullopt;
  }
  auto m = client->call(params, onEvent, *timeoutMs);
  if (!m) {
    fmt::print(stderr, "tally {}: {}\n", cmd, m.error().message);
    rc = kExitEnvironment;
    return std::nullopt;
  }
  if (!m->ok) {
    fmt::print(stderr, "tally {}: {}\n", cmd, rpc::errorSentence(m->error));
    rc = exitForDaemonError(m->error.code);
    return std::nullopt;
  }
  rc = kExitOk;
  return std::move(*m);
}

}  // namespace tally::cli
