#include "cli/daemon_call.h"

#include "cli/option_values.h"

namespace tally::cli {

// --timeout as milliseconds for rpc::Client::call; nullopt after a usage error.
std::optional<int> replyTimeoutMs(const char* cmd, const DaemonCallOptions& o) {
  std::optional<std::uint64_t> us;
  if (!durationOption(cmd, "--timeout", o.replyTimeout, us)) return std::nullopt;
  if (!us || *us == 0 || *us > 3'600'000'000u) {
    fmt::print(stderr, "tally {}: --timeout must be between 1ms and 1h (default 10s)\n", cmd);
    return std::nullopt;
  }
  return static_cast<int>(*us / 1000);
}

// A reply that does not decode: the daemon and this client disagree.
int badReply(const char* cmd, const Error& e) {
  fmt::print(stderr,
             "tally {}: the daemon's reply is malformed ({}); is it another tally version?\n", cmd,
             e.message);
  return kExitEnvironment;
}

void notListed(const nlohmann::json& result) {
  const auto& q = jsonview::get(result, "queued");
  auto total = jsonview::count(jsonview::get(q, "total"));
  auto listed = jsonview::count(jsonview::get(q, "listed"));
  if (total && listed && *total > *listed)
    fmt::print(stderr,
               "{} more queued requests are not listed (the first {}, in grant order, are)\n",
               *total - *listed, *listed);
}

}  // namespace tally::cli
