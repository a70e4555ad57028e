// Where the daemon serves GET /metrics: "127.0.0.1:9464", "[::1]:9464",
// "localhost:9464". Loopback unless the config says otherwise in so many
// words (daemon.metrics_beyond_loopback = true): the metrics name every lease
// and workload on the box, and tally has no authentication to put in front of
// them, so a fleet's Prometheus reaching every node is an operator's explicit
// choice, with a firewall (docs/daemon.md). The config check and the daemon
// apply this one rule.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "util/result.h"

namespace tally::config {

struct ListenAddress {
  std::string host;  // "127.0.0.1", "::1"
  std::uint16_t port = 0;
};

// The error names the value and the rule, without saying where it came from
// (the caller prefixes "daemon.metrics_listen" or "--metrics-listen").
// `beyondLoopback`: any IP address literal of this host's ("0.0.0.0",
// "192.0.2.7", "[::]"); never a name but localhost (no DNS at start).
Result<ListenAddress> parseListenAddress(std::string_view text, bool beyondLoopback = false);
bool isLoopback(const ListenAddress& at);

}  // namespace tally::config
