// A leased step's end on this node (slurmstepd): as its last task exits, the
// step's stderr says what its GPU bound did and the job's AdminComment gets
// this node's line; at slurm_spank_exit the plugin sends the tasks' wait
// status and waits (end_wait) for the daemon's outcome row, so the final
// counters are read before slurmstepd removes the cgroup.
#pragma once

#include "slurm/spank_controller.h"
#include "slurm/spank_state.h"

extern "C" {
#include <slurm/spank.h>
}

namespace tally::slurm::plugin {

// slurm_spank_task_exit: one of the step's tasks here has exited; at the
// last, what must come before srun hears the tasks ended.
void taskExited(StepState& s, const Controller& ctl, spank_t sp);

// slurm_spank_exit: the prefetch joined, then the extern step's end (the
// job's kept record goes) or a leased step's outcome awaited.
void stepEnded(StepState& s, spank_t sp);

}  // namespace tally::slurm::plugin
