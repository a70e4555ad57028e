// `tally logs ID`: ask the daemon which unit the detached job ran as, then
// run journalctl on it and on the lease's scope.
#include "cli/cmd_logs.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli/daemon_call.h"
#include "cli/exit_codes.h"
#include "lease/attributes.h"
#include "lease/unit_names.h"
#include "rpc/lease_api.h"

namespace tally::cli {

using json = nlohmann::json;

CLI::App* addLogsCommand(CLI::App& app, LogsOptions& o) {
  auto* logs = app.add_subcommand("logs", "A detached job's output, from the journal");
  logs->add_option("ID", o.leaseId, "the lease id tally run --detach printed")
      ->required()
      ->check(kNonEmptyLeaseId);
  logs->add_flag("--follow,-f", o.follow, "keep printing new lines as they come");
  logs->add_option("--lines,-n", o.lines, "only the last N lines");
  logs->footer(
      "A 'tally run --pool --detach' job runs as a transient service (tally-job-<token>.service);\n"
      "its output is in the journal: tally run's lines under that unit, the workload's under the\n"
      "lease's scope (tally-<id>.scope). tally logs asks the daemon which unit the job ran as\n"
      "(live or ended) and runs journalctl on both (--user for a user manager's job).\n"
      "Exit status: journalctl's; 3 no daemon, 5 not a detached job or no such lease.");
  addSocketOption(logs, o.socket);
  addReplyTimeoutOption(logs, o.replyTimeout);
  return logs;
}

int runLogs(const LogsOptions& o) {
  int rc = kExitOk;
  auto m = callDaemon("logs", o, rpc::api::LeaseQuery{o.leaseId, false}, rc);
  if (!m) return rc;
  // Live: the lease's attributes; ended: those its granted row recorded.
  json attrs = m->result.value("attributes", json::object());
  if (attrs.empty() && m->result.contains("ledger")) {
    for (const auto& row : m->result["ledger"]) {
      if (row.value("kind", "") == "granted" && row["body"].is_object())
        attrs = row["body"].value("declared", json::object()).value("attributes", json::object());
    }
  }
  std::string unit = attrs.is_object() ? attrs.value(lease::kJobUnitKey, "") : "";
  std::string manager = attrs.is_object() ? attrs.value(lease::kJobManagerKey, "system") : "system";
  if (!lease::isDetachedJobUnit(unit)) {
    fmt::print(stderr,
               "tally logs: lease {} is not a detached job: its output went where the tally run "
               "that held it wrote (a terminal, or its unit's journal). Jobs started with "
               "tally run --pool P --detach have their output here\n",
               o.leaseId);
    return kExitRefused;
  }
  // journald files each line under the unit of the process that wrote it:
  // tally run's own under the job's service, the workload's under the
  // lease's scope (where the workload runs). Both, in time order.
  std::string scope = m->result.value("unit", "");
  if (scope.empty()) scope = lease::leaseScopeName(o.leaseId);
  std::vector<std::string> args = {"journalctl", "--no-pager"};
  if (manager == "user") args.push_back("--user");
  args.insert(args.end(), {"-u", unit, "-u", scope});
  if (o.follow) args.push_back("--follow");
  if (o.lines) args.insert(args.end(), {"--lines", std::to_string(o.lines)});
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  ::execvp(argv[0], argv.data());
  fmt::print(stderr, "tally logs: cannot run journalctl: {}\n", std::strerror(errno));
  return kExitEnvironment;
}

}  // namespace tally::cli
