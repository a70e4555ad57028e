#include "slurm/spank_admin_comment.h"

#include <fmt/format.h>

#include <string>

#include "slurm/spank_daemon.h"

extern "C" {
#include <slurm/spank.h>
}

namespace tally::slurm::plugin {

std::optional<SaidLine> lockSaid(const PluginArgs& args, std::uint32_t job) {
  if (args.jobCache.empty()) return std::nullopt;
  auto locked = lockSaidLine(args.jobCache, job);
  if (locked) return std::move(*locked);
  slurm_info("tally: job %u's AdminComment: %s; written without it", job,
             locked.error().message.c_str());
  return std::nullopt;
}

void writeJobLine(const StepState& s, const Controller& ctl, rpc::Client& client,
                  const Result<rpc::Message>& step, std::optional<SaidLine>& said) {
  const LeasedStep& leased = s.leased;
  const std::uint32_t job = leased.job;
  std::string node = leased.jobNode;
  std::string where = fmt::format("tally: job {}'s AdminComment", job);
  Result<rpc::Message> reply = Error{0, "not asked"};
  if (step && step->ok && step->result.value("parent", "") == leased.jobLease &&
      step->result.contains("parent_view")) {
    rpc::Message parent = *step;
    parent.result = step->result["parent_view"];
    reply = std::move(parent);
  } else {
    reply = liveLease(client, leased.jobLease, daemonTimeoutMs(s.args));
  }
  if (!reply || !reply->ok) {
    slurm_error("%s: the daemon did not say what job lease %s used (%s)", where.c_str(),
                leased.jobLease.c_str(),
                reply ? reply->error.message.c_str() : reply.error().message.c_str());
    return;
  }
  auto bound = stepBoundFromLease(reply->result);
  if (!bound) {
    slurm_error("%s: the daemon's view of lease %s is malformed (%s)", where.c_str(),
                leased.jobLease.c_str(), bound.error().message.c_str());
    return;
  }
  // Nothing new from here: no controller call. (Were slurmstepd's own
  // SLURMD_NODENAME unset, the batch script's line would name the job's
  // BatchHost, which only slurmctld says: asked first.)
  auto unchanged = [&] { return said && said->last() == jobSummary(node, *bound); };
  if (!node.empty() && unchanged()) return;
  auto existing = ctl.adminComment(job);
  if (!existing) {
    slurm_error("%s: slurmctld did not answer (%s); not written", where.c_str(),
                existing.error().message.c_str());
    return;
  }
  // slurmstepd named no node (never on a supported Slurm): the batch script runs on the
  // job's BatchHost.
  if (node.empty() && leased.step == kBatchStep) node = existing->batchHost;
  if (node.empty()) {
    slurm_error("%s: slurmstepd's environment names no node (SLURMD_NODENAME); not written",
                where.c_str());
    return;
  }
  if (unchanged()) return;
  std::string line = jobSummary(node, *bound);
  if (auto w = ctl.setAdminComment(job, mergeAdminComment(existing->comment, node, line)); !w) {
    if (w.error().code == ctl.jobFinished)
      slurm_info("%s: the job had already finished; the ledger has its job lease %s", where.c_str(),
                 leased.jobLease.c_str());
    else
      slurm_error("%s: slurmctld refused the update (%s)", where.c_str(),
                  w.error().message.c_str());
    return;
  }
  if (said)
    if (auto kept = said->remember(line); !kept)
      slurm_info("%s: %s", where.c_str(), kept.error().message.c_str());
  slurm_info("%s: %s", where.c_str(), line.c_str());
}

}  // namespace tally::slurm::plugin
