// `tally lease show ID`: ask the daemon, else read the local ledger; print
// the lease's lines (cli/lease_show.cpp) and its memory timeline.
#include "cli/cmd_lease_show.h"

#include <fmt/format.h>

#include <cstdio>
#include <string>

#include "cli/daemon_call.h"
#include "cli/exit_codes.h"
#include "cli/print_line.h"
#include "rpc/lease_api.h"
#include "views/timeline.h"

namespace tally::cli {

using json = nlohmann::json;

CLI::App* addLeaseShowCommand(CLI::App& lease, LeaseShowOptions& o) {
  auto* show =
      lease.add_subcommand("show", "A lease's state, meters and ledger rows (live or ended)");
  show->add_option("ID", o.leaseId, "the lease id")->required()->check(kNonEmptyLeaseId);
  show->add_flag("--json", o.json, "print as JSON");
  show->add_option("--svg", o.svg,
                   "also write the memory timeline (host and GPU against their limits) "
                   "as an SVG image");
  show->add_option("--state-dir", o.stateDir,
                   "the ledger to read when no daemon answers (default: $TALLY_STATE_DIR, "
                   "/var/lib/tally for root, else ~/.local/state/tally)");
  show->footer(
      "A live lease: its state, pools, declared limits, attributes, age and meters. An ended "
      "one:\n"
      "its outcome, limits and peaks from the ledger, through the daemon or, when none answers, "
      "from\n"
      "the local ledger (a standalone 'tally run' lease too). Exit status: 0 ok, 3 neither a "
      "daemon\n"
      "nor a ledger has it, 5 not found.");
  addSocketOption(show, o.socket);
  addReplyTimeoutOption(show, o.replyTimeout);
  return show;
}

int runLeaseShow(const LeaseShowOptions& o) {
  int rc = kExitOk;
  // The daemon knows live leases and its ledger's; without a daemon the
  // local ledger still has every ended lease (a standalone tally run's too).
  json r;
  if (auto m = callDaemon("lease show", o, rpc::api::LeaseQuery{o.leaseId, false}, rc)) {
    r = m->result;
  } else if (rc == kExitEnvironment || rc == kExitRefused) {
    auto fromLedger = leaseFromLedger(o);
    if (!fromLedger) return rc;
    fmt::print(stderr, "tally lease show: read from the ledger at {}\n", fromLedger->second);
    r = std::move(fromLedger->first);
  } else {
    return rc;
  }
  if (o.json) {
    fmt::print("{}\n", r.dump(2));
    return kExitOk;
  }
  for (const auto& line : leaseShowLines(r)) printLine(line);
  // The memory timeline from the ledger's samples (the daemon's; a standalone
  // run keeps only its peaks), against the limits, with its events marked.
  auto t = leaseTimeline(r);
  if (!t.host.points.empty()) {
    for (const auto* s : {&t.host, &t.gpu}) {
      fmt::print("\n");
      for (const auto& line : views::timelineText(*s, t.marks, 80, 6)) printLine(line);
    }
  } else {
    fmt::print("  (no samples in the ledger: a standalone 'tally run' records its peaks only)\n");
  }
  if (!o.svg.empty()) {
    std::FILE* f = std::fopen(o.svg.c_str(), "w");
    std::string svg = views::timelineSvg({t.host, t.gpu}, t.marks, t.title);
    bool ok = f && std::fwrite(svg.data(), 1, svg.size(), f) == svg.size();
    if (f) ok = std::fclose(f) == 0 && ok;
    if (!ok) {
      fmt::print(stderr, "tally lease show: cannot write {}\n", o.svg);
      return kExitEnvironment;
    }
    fmt::print(stderr, "tally lease show: the timeline is in {}\n", o.svg);
  }
  return kExitOk;
}

}  // namespace tally::cli
