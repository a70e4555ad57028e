#include "slurm/spank_step_end.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>

#include "rpc/client.h"
#include "rpc/messages.h"
#include "slurm/job_store.h"
#include "slurm/spank_admin_comment.h"
#include "slurm/spank_daemon.h"
#include "slurm/spank_prefetch.h"
#include "slurm/spank_timing.h"

namespace tally::slurm::plugin {

namespace {

// The tasks' wait status, for the outcome row: the daemon holds the outcome
// for it (reports_exit), so it is sent even when the cgroup already emptied.
// True once the daemon answered (took it, or said why not); false when the
// call did not reach it, so it is sent again to a restarted daemon.
bool reportExit(const StepState& s, rpc::Client& client, int timeoutMs) {
  auto exit = stepExit(s.leased.lease, s.exits.statuses);
  if (!exit) return true;
  auto reply = client.call(*exit, {}, timeoutMs);
  if (!reply) return false;
  if (!reply->ok)
    slurm_info("tally: lease %s: the daemon did not take the tasks' exit status: %s",
               s.leased.lease.c_str(), reply->error.message.c_str());
  return true;
}

// The step's tasks are gone: wait for the daemon to record the outcome, which
// it reads from the cgroup slurmstepd is about to remove. A daemon restarted
// meanwhile is reconnected to (it re-adopts the lease and waits for the exit
// report, which is sent again if the old daemon never answered it).
void awaitOutcome(StepState& s, const std::string& lease) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(s.args.endWaitUs);
  auto left = [&] {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  deadline - std::chrono::steady_clock::now())
                  .count();
    return static_cast<int>(std::max<long long>(ms, 0));
  };
  bool ended = false;
  std::string lastError;
  // The lease's terminal ledger row (ledger::isTerminal: outcome, lost,
  // withdrawn); a "released" row is a request to end, not the end.
  auto watch = [&](const rpc::Message& ev) {
    if (ev.event != "lease") return;
    auto e = rpc::api::decodeLeaseEvent(ev.raw);
    if (e && e->lease == lease && e->terminal()) ended = true;
  };
  for (bool first = true; !ended && left() > 0; first = false) {
    if (!first) ::usleep(200'000);  // a restarting daemon: its socket comes back
    auto client = rpc::Client::connect(s.args.socket);
    if (!client) {
      lastError = client.error().message;
      continue;
    }
    if (!s.exits.told) s.exits.told = reportExit(s, *client, left());
    if (auto sub = client->call(rpc::api::Subscribe{}, watch, left()); !sub || !sub->ok) {
      lastError = sub ? sub->error.message : sub.error().message;
      continue;
    }
    // Subscribed first, then asked: an ending between the two is not missed.
    auto now = liveLease(*client, lease, left(), watch);
    if (now && now->ok && now->result.value("state", "") == "ended") ended = true;
    if (now && !now->ok) break;  // the daemon no longer knows it: nothing to wait for
    while (!ended && left() > 0) {
      auto ev = client->next(left());
      if (!ev) {
        lastError = ev.error().message;
        break;
      }
      watch(*ev);
    }
  }
  if (!ended) {
    slurm_error(
        "tally: lease %s: no outcome from the daemon at %s within end_wait (%s); it is "
        "recorded when the daemon sees the cgroup empty",
        lease.c_str(), s.args.socket.c_str(),
        lastError.empty() ? "no terminal row yet" : lastError.c_str());
  }
}

// The step's last task has exited: say on the step's stderr what its GPU
// bound did, as Slurm says "Detected 1 oom_kill event" there. Here, not at
// slurm_spank_exit: by then slurmstepd has closed the step's output. The
// daemon's answer (`reply`, about the step's lease) is current: a kill's row
// is written as it kills, and the query drains the kernel's refusals first.
void sayWhatTheBoundDid(const LeasedStep& leased, const Result<rpc::Message>& reply) {
  if (!reply || !reply->ok) return;
  auto bound = stepBoundFromLease(reply->result);
  if (!bound) {
    slurm_error("tally: lease %s: the daemon's view of it is malformed (%s)", leased.lease.c_str(),
                bound.error().message.c_str());
    return;
  }
  for (const auto& line : boundLines(leased.job, leased.step, *bound, leased.noGres))
    slurm_error("%s", line.c_str());
}

}  // namespace

void taskExited(StepState& s, const Controller& ctl, spank_t sp) {
  if (s.leased.lease.empty()) return;
  std::uint32_t local = 0;
  if (spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &local) != ESPANK_SUCCESS) return;
  int status = 0;
  if (spank_get_item(sp, S_TASK_EXIT_STATUS, &status) == ESPANK_SUCCESS)
    s.exits.statuses.push_back(status);
  if (++s.exits.exited != local) return;
  try {
    // Here only what must come before srun hears the tasks ended: the
    // step's stderr line and the job's AdminComment. The tasks' wait status
    // goes with the end wait (slurm_spank_exit, after srun was told): the
    // daemon holds the outcome for it (kExitReportWaitUs).
    if (auto client = rpc::Client::connect(s.args.socket)) {
      // One question for the step and its job, asked under the job's lock:
      // steps ending here at once write the job's line in the order their
      // figures were read, so a later step's line is never older.
      const bool writesLine = s.args.adminComment && !s.leased.jobLease.empty() && !s.leased.noGres;
      std::optional<SaidLine> said = writesLine ? lockSaid(s.args, s.leased.job) : std::nullopt;
      auto reply = [&] {
        PhaseTimer timer("end-query");
        return liveLease(*client, s.leased.lease, daemonTimeoutMs(s.args));
      }();
      sayWhatTheBoundDid(s.leased, reply);
      // Only with admin_comment=on, and never for a job without the GRES
      // (no_gres): it costs slurmctld nothing; its stderr said what the bound
      // did, and the ledger has the rest.
      if (writesLine) writeJobLine(s, ctl, *client, reply, said);
    }
  } catch (const std::exception& e) {
    slurm_error("tally: lease %s: %s", s.leased.lease.c_str(), e.what());
  }
}

void stepEnded(StepState& s, spank_t sp) {
  joinPrefetch(s);  // no task was forked: no thread outlives the plugin
  std::uint32_t step = 0, job = 0;
  if (s.args.enforce && spank_get_item(sp, S_JOB_STEPID, &step) == ESPANK_SUCCESS &&
      step == kExternStep) {
    // The job ends on this node: its kept GRES goes with it.
    if (spank_get_item(sp, S_JOB_ID, &job) == ESPANK_SUCCESS) forgetJobRecord(s.args.jobCache, job);
    return;
  }
  if (s.leased.lease.empty()) return;
  try {
    awaitOutcome(s, s.leased.lease);
  } catch (const std::exception& e) {
    slurm_error("tally: lease %s: %s", s.leased.lease.c_str(), e.what());
  }
}

}  // namespace tally::slurm::plugin
