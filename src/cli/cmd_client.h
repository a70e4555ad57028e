// What the daemon's client commands share. Each is declared and run in its
// own file (cli/cmd_leases.cpp, cmd_lease_show.cpp, cmd_lease_release.cpp,
// cmd_logs.cpp, cmd_pools.cpp, cmd_attach.cpp, cmd_events.cpp,
// cmd_seats.cpp, cmd_metrics.cpp, cmd_daemon_status.cpp); here are the
// options that reach the daemon (cli/client_options.cpp) and a lease's lines
// and timeline (cli/lease_show.cpp).
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "enforce/gpu_bound.h"
#include "views/timeline.h"

namespace tally::cli {

// Which daemon a client command asks, and how long it waits for the answer.
struct DaemonCallOptions {
  std::string socket;                // "" = socketPath("")
  std::string replyTimeout = "10s";  // --timeout: how long the daemon has to answer
};

// `tally lease show`'s lines for the daemon's "lease" reply (or the same shape
// read from the ledger): live state and limits, or the ended lease's outcome.
std::vector<std::string> leaseShowLines(const nlohmann::json& lease);

// The lease's memory over time from that reply's samples, its limits and its
// events (GPU bound, the outcome), for views::timelineText/timelineSvg.
struct LeaseTimeline {
  views::TimelineSeries host, gpu;
  std::vector<views::TimelineMark> marks;
  std::string title;  // "lease ID (NAME), from DATE TIME": the picture's heading
};
LeaseTimeline leaseTimeline(const nlohmann::json& lease);

// How long ago `ns` was (CLOCK_REALTIME), or "-".
std::string ageText(const nlohmann::json& ns);

// "--socket PATH (default: $TALLY_SOCKET, else ...)" for every client command.
void addSocketOption(CLI::App* cmd, std::string& socket);
// "--timeout DURATION": how long the daemon has to answer (default 10s).
void addReplyTimeoutOption(CLI::App* cmd, std::string& timeout);
// A lease ID argument (lease show, lease release, logs): an empty ID would
// match the ledger's rows that belong to no lease.
extern const CLI::Validator kNonEmptyLeaseId;

}  // namespace tally::cli
