// `tally daemon status`: a client command under `tally daemon`: the daemon's
// overview as lines (views/daemon_status.h) or its JSON objects.
#include "cli/cmd_daemon_status.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli/daemon_call.h"
#include "cli/exit_codes.h"
#include "cli/print_line.h"
#include "rpc/lease_api.h"
#include "util/clock.h"
#include "views/daemon_status.h"

namespace tally::cli {

CLI::App* addDaemonStatusCommand(CLI::App& app, DaemonStatusOptions& o) {
  // Under `tally daemon` (added before the client commands), served like them.
  CLI::App* daemon = nullptr;
  for (CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    if (sub->get_name() == "daemon") daemon = sub;
  if (!daemon) return nullptr;
  auto* status = daemon->add_subcommand(
      "status",
      "What the running daemon says of itself: uptime, leases, kernel charge, coverage, "
      "ledger");
  status->footer(
      "The kernel charge line says whether GPU memory is charged to the lease that creates "
      "it and the\ncrossing allocation refused (BPF), and if not exactly why and what to do; "
      "tally doctor says the\nsame of this host without a daemon.\n"
      "Exit status: 0 the daemon answers and its ledger writes, 1 its ledger cannot write (new "
      "leases and\nreleases are refused), 3 the daemon cannot be reached or did not answer.");
  status->add_flag("--json", o.json,
                   "print the daemon, kernel_charge, coverage and ledger objects");
  status->add_flag("--utc", o.utc, "times in UTC (default: local time)");
  addSocketOption(status, o.socket);
  addReplyTimeoutOption(status, o.replyTimeout);
  return status;
}

int runDaemonStatus(const DaemonStatusOptions& o) {
  int rc = kExitOk;
  auto m = callDaemon("daemon status", o, rpc::api::Overview{}, rc);
  if (!m) return rc;
  auto st = views::daemonStatus(m->result, clock::realtimeNs(), o.utc);
  if (o.json) {
    nlohmann::json out = nlohmann::json::object();
    for (const char* k : {"daemon", "sample_interval_us", "kernel_charge", "coverage", "ledger"})
      if (m->result.contains(k)) out[k] = m->result[k];
    fmt::print("{}\n", out.dump(2));
  } else {
    for (const auto& line : st.lines) printLine(line);
  }
  return st.ledgerWrites ? kExitOk : kExitDegraded;
}

}  // namespace tally::cli
