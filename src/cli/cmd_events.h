// `tally events`: follow the daemon's events, with their time.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace tally::cli {

struct EventsOptions {
  std::string socket;       // "" = socketPath("")
  std::uint64_t count = 0;  // 0 = until interrupted
  std::string eventsTimeout;
  std::string since, until;  // parseWhen's forms
  std::vector<std::string> eventLeases, eventPools, eventKinds;
  std::string user;  // --user: a login name or a uid
  bool utc = false;
  bool json = false;
};

CLI::App* addEventsCommand(CLI::App& app, EventsOptions& opts);
int runEvents(const EventsOptions& opts);

}  // namespace tally::cli
