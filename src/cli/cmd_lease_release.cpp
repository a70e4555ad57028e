// `tally lease release ID`: the daemon cancels, withdraws, ends or stops the
// lease; this prints what it did.
#include "cli/cmd_lease_release.h"

#include <fmt/format.h>

#include "cli/daemon_call.h"
#include "cli/exit_codes.h"
#include "rpc/lease_api.h"
#include "rpc/messages.h"

namespace tally::cli {

CLI::App* addLeaseReleaseCommand(CLI::App& lease, LeaseReleaseOptions& o) {
  auto* release = lease.add_subcommand("release", "End a lease (its owner or root)");
  release->footer(
      "A queued request is cancelled. A granted lease that never started is withdrawn. An "
      "attached\n"
      "lease ends now with its final counters recorded; the workload goes on outside the lease.\n"
      "A running 'tally run' lease is stopped: SIGTERM to its processes, SIGKILL after 10 s; its\n"
      "client records the outcome. Exit status: 0 ok, 3 no daemon or no answer, 5 refused (not "
      "yours, not "
      "found).");
  release->add_option("ID", o.leaseId, "the lease id")->required()->check(kNonEmptyLeaseId);
  release->add_flag("--json", o.json, "print the reply as JSON");
  addSocketOption(release, o.socket);
  addReplyTimeoutOption(release, o.replyTimeout);
  return release;
}

int runLeaseRelease(const LeaseReleaseOptions& o) {
  int rc = kExitOk;
  auto m = callDaemon("lease release", o, rpc::api::Release{{o.leaseId}}, rc);
  if (!m) return rc;
  auto r = rpc::api::decodeReleaseReply(m->result);
  if (!r) return badReply("lease release", r.error());
  if (o.json)
    fmt::print("{}\n", m->result.dump(2));
  else
    fmt::print("lease {}: {}\n", r->lease, r->state);
  return kExitOk;
}

}  // namespace tally::cli
