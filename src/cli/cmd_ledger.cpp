// `tally ledger`: the recorded outcomes, newest last.
#include "cli/cmd_ledger.h"

#include <fmt/format.h>
#include <time.h>

#include <nlohmann/json.hpp>

#include "cli/exit_codes.h"
#include "ledger/ledger.h"

namespace tally::cli {

void addLedgerCommand(CLI::App& app, LedgerOptions& o) {
  auto* cmd = app.add_subcommand("ledger", "The recorded lease outcomes (newest last)");
  cmd->footer(
      "Every 'tally run' appends one row, refused leases included. Rows are never rewritten.\n"
      "Exit status: 0 ok, 3 the ledger cannot be opened.");
  cmd->add_flag("--json", o.json, "print the full outcome records as a JSON array");
  cmd->add_option("--limit", o.limit, "how many of the newest rows")->default_str("20");
  cmd->add_option("--state-dir", o.stateDir,
                  "where the ledger lives (default: $TALLY_STATE_DIR, /var/lib/tally for root, else ~/.local/state/tally)");
}

int runLedger(const LedgerOptions& o) {
  std::string dir = o.stateDir.empty() ? ledger::defaultStateDir() : o.stateDir;
  auto db = ledger::Ledger::open(dir);
  if (!db) {
    fmt::print(stderr, "tally ledger: {}\n", db.error().message);
    return kExitEnvironment;
  }
  auto rows = db->recent(o.limit);
  if (!rows) {
    fmt::print(stderr, "tally ledger: {}\n", rows.error().message);
    return kExitEnvironment;
  }
  if (o.json) {
    auto out = nlohmann::ordered_json::array();
    for (const auto& r : *rows) {
      auto rec = nlohmann::ordered_json::parse(r.entry.recordJson, nullptr, false);
      out.push_back({{"seq", r.seq}, {"record", rec}});
    }
    fmt::print("{}\n", out.dump(2));
    return kExitOk;
  }
  fmt::print("{:>5}  {:<20}  {:<12}  {:<16}  {:<9}  {:<20}  {}\n", "SEQ", "STARTED (UTC)", "LEASE", "NAME", "MANAGER",
             "OUTCOME", "EXIT");
  for (const auto& r : *rows) {
    time_t secs = static_cast<time_t>(r.entry.startedAtNs / 1000000000u);
    tm utc{};
    gmtime_r(&secs, &utc);
    char when[32];
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &utc);
    fmt::print("{:>5}  {:<20}  {:<12}  {:<16}  {:<9}  {:<20}  {}\n", r.seq, when, r.entry.leaseId, r.entry.name,
               r.entry.manager, r.entry.outcomeClass, r.entry.exitStatus);
  }
  return kExitOk;
}

}  // namespace tally::cli
