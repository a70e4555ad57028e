// `tally seats`: every page of the daemon's seat rows, as a table
// (views/top.h) or the RPC's JSON.
#include "cli/cmd_seats.h"

#include <fmt/format.h>

#include <string>

#include "cli/daemon_call.h"
#include "cli/exit_codes.h"
#include "cli/print_line.h"
#include "cli/user_names.h"
#include "rpc/lease_api.h"
#include "util/text.h"
#include "views/top.h"

namespace tally::cli {

CLI::App* addSeatsCommand(CLI::App& app, SeatsOptions& o) {
  auto* seats = app.add_subcommand(
      "seats", "One row per lease: running, host and GPU memory against limits, fresh or stale");
  seats->footer(
      "A seat row is measured (cgroup memory.current/peak/max, DRM fdinfo per region), declared "
      "(limits,\n"
      "--attr attributes), or absent with the reason. 'running' is cgroup.events populated, read "
      "now.\n"
      "A row not sampled within 2 x sample_interval is stale: it shows no figures at all ('-'),\n"
      "never the last value as if it were current. The JSON rows are the daemon's 'seats' RPC "
      "reply.\n" +
      std::string(kReadingExitStatus));
  seats->add_flag("--json", o.json,
                  "print the rows as JSON (with observed_at_ns and sample_interval_us)");
  addSocketOption(seats, o.socket);
  addReplyTimeoutOption(seats, o.replyTimeout);
  return seats;
}

int runSeats(const SeatsOptions& o) {
  int rc = kExitOk;
  auto all = allPages<rpc::api::Seats>("seats", o, rc);
  if (!all) return rc;
  UserNames names;
  names.annotate((*all)["seats"]);
  if (o.json) {
    fmt::print("{}\n", all->dump(2));
    return kExitOk;
  }
  for (const auto& line : views::seatTable((*all)["seats"], 1000)) printLine(text::trimRight(line));
  notListed(*all);
  return kExitOk;
}

}  // namespace tally::cli
