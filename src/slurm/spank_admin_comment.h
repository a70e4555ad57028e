// This node's line in the job's AdminComment, written as a leased step's last
// task here exits: from the job's lease as it stands (its peak so far), so
// `sacct -o AdminComment` (and `scontrol show job` while slurmctld keeps the
// job) says how much GPU memory the job used here as of its last step.
#pragma once

#include <cstdint>
#include <optional>

#include "rpc/client.h"
#include "slurm/job_store.h"
#include "slurm/spank_controller.h"
#include "slurm/spank_state.h"
#include "util/result.h"

namespace tally::slurm::plugin {

// The line this node last wrote for `job`, locked (see writeJobLine); none
// without job_cache= or when it cannot be locked (the line is then written).
std::optional<SaidLine> lockSaid(const PluginArgs& args, std::uint32_t job);

// Written here, before slurmstepd tells srun the tasks are gone: after that
// srun may end the job, and slurmctld refuses updates to a finished job ("Job
// has already finished"), as it does at the extern step's end. Two controller
// calls as a step ends, never as one starts, and none when this node's line
// is what a step here last wrote (`said`, job_cache=: the job's steps here
// decide in turn, under one lock); each node replaces only its own line.
// Best effort: the ledger keeps the full record. `step` is the daemon's
// answer about the step's lease, which carries its job's lease as
// parent_view; a daemon that sends none is asked for it on `client`.
void writeJobLine(const StepState& s, const Controller& ctl, rpc::Client& client,
                  const Result<rpc::Message>& step, std::optional<SaidLine>& said);

}  // namespace tally::slurm::plugin
