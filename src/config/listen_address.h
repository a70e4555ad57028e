// Where the daemon serves GET /metrics: "127.0.0.1:9464", "[::1]:9464",
// "localhost:9464". Only loopback: the metrics name every lease and workload
// on the box, and tally has no authentication to put in front of them. The
// config check and the daemon apply this one rule.
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
Result<ListenAddress> parseListenAddress(std::string_view text);

}  // namespace tally::config
