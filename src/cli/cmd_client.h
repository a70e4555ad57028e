// The daemon's client commands: tally leases, tally lease show|release,
// tally pools, tally attach.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "enforce/gpu_bound.h"
#include "views/timeline.h"

namespace tally::cli {

struct ClientOptions {
  std::string socket;                // "" = socketPath("")
  std::string stateDir;              // lease show: the ledger to read when no daemon answers
  std::string svg;                   // lease show: write the timeline here too
  std::string replyTimeout = "10s";  // --timeout: how long the daemon has to answer
  bool json = false;
  std::string leaseId;
  // attach
  std::string unit, cgroup, container, engine;
  std::string parent;  // attach: the lease this one nests in (a child lease)
  std::uint64_t pid = 0;
  std::vector<std::string> pools;
  std::string memoryMax, gpuMemoryMax, gpuMemoryHigh, name, queueTimeout;
  std::string gpuAction = enforce::actionName(enforce::kDefaultAction);
  bool force = false;  // attach: even when already over a declared limit
  bool wait = false;   // attach: queue when the pool cannot grant it now
  unsigned gpuOverSamples = enforce::kDefaultConsecutive;
  int priority = 0;
  std::vector<std::string> attrs;  // --attr KEY=VALUE
  // logs
  bool follow = false;
  std::uint64_t lines = 0;  // 0: all of them
  // events
  std::uint64_t count = 0;  // 0 = until interrupted
  std::string eventsTimeout;
  std::string since, until;  // parseWhen's forms
  std::vector<std::string> eventLeases, eventPools, eventKinds;
  bool utc = false;
};

struct ClientCommands {
  CLI::App* leases = nullptr;
  CLI::App* leaseShow = nullptr;
  CLI::App* leaseRelease = nullptr;
  CLI::App* pools = nullptr;
  CLI::App* attach = nullptr;
  CLI::App* events = nullptr;
  CLI::App* seats = nullptr;
  CLI::App* metrics = nullptr;
  CLI::App* logs = nullptr;
  CLI::App* daemonStatus = nullptr;  // `tally daemon status`
};

ClientCommands addClientCommands(CLI::App& app, ClientOptions& opts);
int runClientCommand(const ClientCommands& cmds, const ClientOptions& opts);

// `tally lease show`'s lines for the daemon's "lease" reply (or the same shape
// read from the ledger): live state and limits, or the ended lease's outcome.
std::vector<std::string> leaseShowLines(const nlohmann::json& lease);

// The lease's memory over time from that reply's samples, its limits and its
// events (GPU bound, the outcome), for views::timelineText/timelineSvg.
struct LeaseTimeline {
  views::TimelineSeries host, gpu;
  std::vector<views::TimelineMark> marks;
};
LeaseTimeline leaseTimeline(const nlohmann::json& lease);

// The pieces of the client commands that live in their own files.
int followEvents(const ClientOptions& o);  // tally events (cli/cmd_events.cpp)
// A lease from the local ledger, as the daemon's "lease" reply has it, and
// the ledger's path; nullopt after saying why (cli/lease_show.cpp).
std::optional<std::pair<nlohmann::json, std::string>> leaseFromLedger(const ClientOptions& o);
// How long ago `ns` was (CLOCK_REALTIME), or "-".
std::string ageText(const nlohmann::json& ns);

// "--socket PATH (default: $TALLY_SOCKET, else ...)" for every client command.
void addSocketOption(CLI::App* cmd, std::string& socket);
// "--timeout DURATION": how long the daemon has to answer (default 10s).
void addReplyTimeoutOption(CLI::App* cmd, std::string& timeout);

}  // namespace tally::cli
