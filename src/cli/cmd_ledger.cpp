// `tally ledger`: the recorded outcomes, newest last.
#include "cli/cmd_ledger.h"

#include <fmt/format.h>
#include <time.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <tuple>

#include "cli/exit_codes.h"
#include "config/config.h"
#include "ledger/ledger.h"
#include "util/clock.h"
#include "util/text.h"
#include "views/ledger_view.h"

namespace tally::cli {

namespace {

constexpr const char* kStateDirHelp =
    "where the ledger lives (default: $TALLY_STATE_DIR, /var/lib/tally for root, else "
    "~/.local/state/tally)";

// --state-dir wins; else --config's [daemon] state_dir; else the default.
std::optional<std::string> stateDirOf(const LedgerOptions& o) {
  if (!o.stateDir.empty()) return o.stateDir;
  if (!o.config.empty()) {
    auto parsed = config::load(o.config);
    if (!parsed.config) {
      fmt::print(stderr, "{}tally ledger: the config has problems\n",
                 config::formatProblems(parsed, o.config));
      return std::nullopt;
    }
    if (!parsed.config->daemon.stateDir.empty()) return parsed.config->daemon.stateDir;
  }
  return ledger::defaultStateDir();
}

using ojson = nlohmann::ordered_json;

int runVerify(ledger::Ledger& db, const LedgerOptions& o) {
  auto rep = db.verify();
  if (!rep) {
    fmt::print(stderr, "tally ledger verify: {}\n", rep.error().message);
    return kExitEnvironment;
  }
  if (o.json) {
    fmt::print("{}\n", ojson{{"ledger", db.path()},
                             {"intact", rep->problems.empty()},
                             {"rows", rep->rows},
                             {"head_seq", rep->headSeq},
                             {"head_hash", rep->headHash},
                             {"legacy_rows", rep->legacyRows},
                             {"problems", rep->problems}}
                           .dump(2));
  } else if (rep->problems.empty()) {
    fmt::print("{}: intact: {}, head #{} {}\n", db.path(), text::counted(rep->rows, "row", "rows"),
               rep->headSeq, rep->headHash.empty() ? "(empty)" : rep->headHash);
    if (rep->legacyRows)
      fmt::print("({} schema-1 rows predate the chain and are not covered by it)\n",
                 rep->legacyRows);
  } else {
    fmt::print("{}: BROKEN: {} in {}\n", db.path(),
               text::counted(rep->problems.size(), "problem", "problems"),
               text::counted(rep->rows, "row", "rows"));
    for (const auto& p : rep->problems) fmt::print("  {}\n", p);
  }
  return rep->problems.empty() ? kExitOk : kExitDegraded;
}

int runExport(ledger::Ledger& db) {
  auto events = db.events();
  if (!events) {
    fmt::print(stderr, "tally ledger export: {}\n", events.error().message);
    return kExitEnvironment;
  }
  auto out = ojson::array();
  for (const auto& e : *events) {
    auto body = ojson::parse(e.body, nullptr, false);
    out.push_back({{"seq", e.seq},
                   {"at_ns", e.atNs},
                   {"lease", e.leaseId},
                   {"kind", e.kind},
                   {"body", body.is_discarded() ? ojson(e.body) : body},
                   {"prev_hash", e.prevHash},
                   {"hash", e.hash}});
  }
  fmt::print("{}\n", out.dump(2));
  return kExitOk;
}

}  // namespace

void addLedgerCommand(CLI::App& app, LedgerOptions& o) {
  auto* cmd = app.add_subcommand(
      "ledger", "The recorded lease outcomes (newest last); verify or export the chain");
  cmd->footer(
      "Every lease's outcome is one row: 'tally run' appends it, the daemon appends lifecycle "
      "rows\n"
      "(granted, started, adopted, readopted, released) and the outcome. Rows are never rewritten "
      "and\n"
      "form a hash chain; 'tally ledger verify' names any edited, deleted or reordered row.\n"
      "Reading never creates anything: with no ledger at the state dir, the command says so.\n"
      "Exit status: 0 ok, 1 verify found a broken chain, 3 no ledger there or it cannot be "
      "opened.");
  cmd->add_flag("--json", o.json, "print the full outcome records as a JSON array");
  cmd->add_option("--last,--limit", o.limit, "the newest N rows that match (0: all)")
      ->default_str("20");
  cmd->add_option("--since", o.since,
                  "leases started at or after: 2026-11-30, '2026-11-30 14:05', or ago: 2h, 3d");
  cmd->add_option("--until", o.until, "leases started at or before (same forms as --since)");
  cmd->add_option("--name", o.name, "only leases with this name");
  cmd->add_option("--outcome", o.outcome,
                  "only this outcome class (exited, oom-killed, killed-by-tally, ...)");
  cmd->add_option("--lease", o.lease, "only this lease (an id or its first characters)");
  cmd->add_flag("--utc", o.utc, "times in UTC (default: local time)");
  cmd->add_option("--state-dir", o.stateDir, kStateDirHelp);
  cmd->add_option("--config", o.config, "read the state dir from this daemon config");
  o.verify = cmd->add_subcommand(
      "verify", "Check the hash chain: every row's hash and link to the row before");
  o.verify->add_flag("--json", o.json, "print the report as JSON");
  o.verify->add_option("--state-dir", o.stateDir, kStateDirHelp);
  o.verify->add_option("--config", o.config, "read the state dir from this daemon config");
  o.verify->footer(
      "Prints the head (last seq and hash): keep it elsewhere to detect a truncated tail later.\n"
      "Exit status: 0 intact, 1 broken (each problem names its row), 3 no ledger there (none is\n"
      "created) or it cannot be opened.");
  o.exportCmd = cmd->add_subcommand(
      "export", "Every chain row (lifecycle and outcomes) as JSON, with hashes");
  o.exportCmd->add_flag("--json", o.json, "JSON (the only format; accepted for symmetry)");
  o.exportCmd->add_option("--state-dir", o.stateDir, kStateDirHelp);
  o.exportCmd->add_option("--config", o.config, "read the state dir from this daemon config");
}

int runLedger(const LedgerOptions& o) {
  auto dir = stateDirOf(o);
  if (!dir) return kExitDegraded;
  auto db = ledger::Ledger::openExisting(*dir);
  if (!db) {
    fmt::print(stderr, "tally ledger: {}\n", db.error().message);
    return kExitEnvironment;
  }
  if (o.verify && o.verify->parsed()) return runVerify(*db, o);
  if (o.exportCmd && o.exportCmd->parsed()) return runExport(*db);
  views::LedgerFilter filter;
  filter.name = o.name;
  filter.outcome = o.outcome;
  filter.lease = o.lease;
  filter.last = o.limit;
  std::uint64_t now = clock::realtimeNs();
  for (auto [flag, text, out] : {std::tuple{"--since", &o.since, &filter.sinceNs},
                                 std::tuple{"--until", &o.until, &filter.untilNs}}) {
    if (text->empty()) continue;
    auto t = views::parseWhen(*text, now, o.utc);
    if (!t) {
      fmt::print(stderr, "tally ledger: {} {}\n", flag, t.error().message);
      return kExitUsage;
    }
    *out = *t;
  }
  bool filtered =
      filter.sinceNs || filter.untilNs || !o.name.empty() || !o.outcome.empty() || !o.lease.empty();
  // Filters look at every row; without them only the newest are read.
  auto all = db->recent(filtered || o.limit == 0 ? SIZE_MAX : o.limit);
  if (!all) {
    fmt::print(stderr, "tally ledger: {}\n", all.error().message);
    return kExitEnvironment;
  }
  auto rows = std::optional(views::filterRows(*all, filter));
  if (o.json) {
    auto out = nlohmann::ordered_json::array();
    for (const auto& r : *rows) {
      auto rec = nlohmann::ordered_json::parse(r.entry.recordJson, nullptr, false);
      out.push_back({{"seq", r.seq}, {"legacy", r.legacy}, {"record", rec}});
    }
    fmt::print("{}\n", out.dump(2));
    return kExitOk;
  }
  for (const auto& line : views::ledgerTable(*rows, o.utc)) fmt::print("{}\n", line);
  return kExitOk;
}

}  // namespace tally::cli
