// `tally metrics`: print the daemon's exposition as it sends it.
#include "cli/cmd_metrics.h"

#include <fmt/format.h>

#include <string>

#include "cli/daemon_call.h"
#include "cli/exit_codes.h"
#include "rpc/lease_api.h"
#include "rpc/messages.h"

namespace tally::cli {

CLI::App* addMetricsCommand(CLI::App& app, MetricsOptions& o) {
  auto* metrics =
      app.add_subcommand("metrics", "Print the daemon's metrics in the Prometheus text format");
  metrics->footer(
      "Leases (host and GPU memory, limits, running, fresh), pools (holders, queue, budgets, "
      "headroom),\n"
      "devices (GTT/VRAM used and total), unattributed GPU memory, coverage, and counters of GPU "
      "bound\n"
      "events and lease outcomes. A figure tally did not measure has no sample (never 0).\n"
      "The daemon can also keep a node_exporter textfile (--metrics-textfile) and serve GET "
      "/metrics on\n"
      "loopback (--metrics-listen 127.0.0.1:9464). Check: tally metrics | promtool check "
      "metrics\n" +
      std::string(kReadingExitStatus));
  addSocketOption(metrics, o.socket);
  addReplyTimeoutOption(metrics, o.replyTimeout);
  return metrics;
}

int runMetrics(const MetricsOptions& o) {
  int rc = kExitOk;
  auto m = callDaemon("metrics", o, rpc::api::Metrics{}, rc);
  if (!m) return rc;
  auto r = rpc::api::decodeMetricsReply(m->result);
  if (!r) return badReply("metrics", r.error());
  fmt::print("{}", r->text);
  return kExitOk;
}

}  // namespace tally::cli
