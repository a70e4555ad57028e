// `tally ledger`: the recorded outcomes, newest last.
#include "cli/cmd_ledger.h"

#include <fmt/format.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <tuple>

#include "cli/exit_codes.h"
#include "cli/print_line.h"
#include "cli/user_names.h"
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
  std::vector<std::string> accepted;
  if (auto a = db.acknowledgedDamage()) accepted = *a;
  if (o.json) {
    fmt::print("{}\n", ojson{{"ledger", db.path()},
                             {"intact", rep->problems.empty()},
                             {"rows", rep->rows},
                             {"head_seq", rep->headSeq},
                             {"head_hash", rep->headHash},
                             {"legacy_rows", rep->legacyRows},
                             {"witness_seq", rep->witnessSeq ? ojson(*rep->witnessSeq) : ojson()},
                             {"problems", rep->problems},
                             {"acknowledged", accepted}}
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
    for (const auto& p : rep->problems)
      fmt::print("  {}{}\n", text::printable(p),
                 std::find(accepted.begin(), accepted.end(), p) != accepted.end()
                     ? " (acknowledged)"
                     : "");
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

// An operator's decision on damage verify() found: shown first, recorded
// only with --yes. The daemon grants again (after a restart) while the
// damage is no more than what was accepted.
int runAcknowledge(ledger::Ledger& db, const LedgerOptions& o) {
  auto rep = db.verify();
  if (!rep) {
    fmt::print(stderr, "tally ledger acknowledge: {}\n", rep.error().message);
    return kExitEnvironment;
  }
  auto accepted = db.acknowledgedDamage();
  auto open =
      ledger::unacknowledged(rep->problems, accepted ? *accepted : std::vector<std::string>{});
  if (open.empty()) {
    fmt::print("{}: nothing to acknowledge: {}\n", db.path(),
               rep->problems.empty() ? "the chain is intact"
                                     : "every problem found was acknowledged before");
    return kExitOk;
  }
  fmt::print("{}: {} no operator accepted:\n", db.path(),
             text::counted(open.size(), "problem", "problems"));
  for (const auto& p : open) fmt::print("  {}\n", p);
  if (!o.yes) {
    fmt::print(
        "Nothing written. Keep a copy first (tally ledger export > ledger-before.json; restore "
        "from a backup if you have one). To accept the chain as it is, run again with --yes, "
        "then restart the daemon (systemctl restart tally).\n");
    return kExitDegraded;
  }
  auto ev = db.acknowledgeDamage(rep->problems, static_cast<std::uint32_t>(::geteuid()));
  if (!ev) {
    fmt::print(stderr, "tally ledger acknowledge: {}\n", ev.error().message);
    return kExitEnvironment;
  }
  fmt::print(
      "acknowledged as row #{} ({}); restart the daemon so it grants again "
      "(systemctl restart tally)\n",
      ev->seq, ledger::kDamageAcknowledged);
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
                  "leases started at or after: today, yesterday, now, 2026-11-30, '2026-11-30 "
                  "14:05', or ago: 2h, 3d");
  cmd->add_option("--until", o.until, "leases started at or before (same forms as --since)");
  cmd->add_option("--name", o.name, "only leases with this name");
  cmd->add_option("--outcome", o.outcome,
                  "only this outcome class (exited, oom-killed, killed-by-tally, ...)");
  cmd->add_option("--lease", o.lease, "only this lease (an id or its first characters)");
  cmd->add_option("--user", o.user, "only this user's leases (a login name or a uid)");
  cmd->add_flag("--utc", o.utc, "times in UTC (default: local time)");
  cmd->add_option("--state-dir", o.stateDir, kStateDirHelp);
  cmd->add_option("--config", o.config, "read the state dir from this daemon config");
  o.verify = cmd->add_subcommand(
      "verify", "Check the hash chain: every row's hash and link to the row before");
  o.verify->add_flag("--json", o.json, "print the report as JSON");
  o.verify->add_option("--state-dir", o.stateDir, kStateDirHelp);
  o.verify->add_option("--config", o.config, "read the state dir from this daemon config");
  o.verify->footer(
      "Rows lost at the end (a lost write-ahead log) are found through the head witness, a\n"
      "file beside the database moved on after every committed row; the head printed here\n"
      "(last seq and hash), kept elsewhere, finds them even when the witness went too.\n"
      "Problems an operator accepted (tally ledger acknowledge) are marked so.\n"
      "Exit status: 0 intact, 1 broken (each problem names its row), 3 no ledger there (none is\n"
      "created) or it cannot be opened.");
  o.acknowledge = cmd->add_subcommand("acknowledge",
                                      "Accept the damage verify found, so the daemon grants again");
  o.acknowledge->add_flag("--yes", o.yes, "write the acknowledgement (without it: only show it)");
  o.acknowledge->add_option("--state-dir", o.stateDir, kStateDirHelp);
  o.acknowledge->add_option("--config", o.config, "read the state dir from this daemon config");
  o.acknowledge->footer(
      "A damaged ledger (an edited or lost row, a lost write-ahead log) stops the daemon from\n"
      "granting new leases: its record of what it granted cannot be trusted. Running leases stay\n"
      "bounded. Restore the ledger from a backup, or accept the chain as it is: this appends a\n"
      "damage-acknowledged row listing every problem (who accepted it, when) and moves the head\n"
      "witness to it. New damage after that stops grants again.\n"
      "Exit status: 0 acknowledged (or nothing to), 1 shown but not written (no --yes), 3 no\n"
      "ledger there or it cannot be written.");
  o.exportCmd = cmd->add_subcommand(
      "export", "Every chain row (lifecycle and outcomes) as JSON, with hashes");
  o.exportCmd->add_flag("--json", o.json, "JSON (the only format; accepted for symmetry)");
  o.exportCmd->add_option("--state-dir", o.stateDir, kStateDirHelp);
  o.exportCmd->add_option("--config", o.config, "read the state dir from this daemon config");
}

int runLedger(const LedgerOptions& o) {
  // The command line first: a user nobody is, before any ledger is opened.
  std::optional<std::uint32_t> owner;
  if (!userOption("ledger", o.user, owner)) return kExitUsage;
  auto dir = stateDirOf(o);
  if (!dir) return kExitDegraded;
  auto db = ledger::Ledger::openExisting(*dir);
  if (!db) {
    // A user's pool leases are the daemon's to record, in root's ledger: say
    // where they are rather than only that this user's own ledger is empty.
    bool ownDefault = o.stateDir.empty() && o.config.empty() && ::geteuid() != 0;
    fmt::print(stderr, "tally ledger: {}{}\n", db.error().message,
               ownDefault ? ". Leases through the daemon (--pool, attach) are in its ledger, "
                            "which root reads (sudo tally ledger); tally lease show ID shows one "
                            "of yours"
                          : "");
    return kExitEnvironment;
  }
  if (o.verify && o.verify->parsed()) return runVerify(*db, o);
  if (o.exportCmd && o.exportCmd->parsed()) return runExport(*db);
  if (o.acknowledge && o.acknowledge->parsed()) return runAcknowledge(*db, o);
  views::LedgerFilter filter;
  filter.name = o.name;
  filter.outcome = o.outcome;
  filter.lease = o.lease;
  filter.last = o.limit;
  filter.owner = owner;
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
  bool filtered = filter.sinceNs || filter.untilNs || !o.name.empty() || !o.outcome.empty() ||
                  !o.lease.empty() || filter.owner;
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
  UserNames names;
  for (const auto& line :
       views::ledgerTable(*rows, o.utc, [&](std::uint32_t uid) { return names.of(uid); }))
    printLine(line);
  return kExitOk;
}

}  // namespace tally::cli
