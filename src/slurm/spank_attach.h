// slurmstepd's post-fork: at the first task's, when the task is in its cgroup
// and has not exec'd, the step's user cgroup is attached to the node's daemon
// (inside its job's lease when the job holds the GRES here); a step that
// declared a bound and is not leased never runs (spank_verdict.h). At the
// extern step's (PrologFlags=Contain), the job's lease is made as the job
// starts here.
#pragma once

#include "slurm/spank_controller.h"
#include "slurm/spank_state.h"

extern "C" {
#include <slurm/spank.h>
}

namespace tally::slurm::plugin {

// slurm_spank_task_post_fork in slurmstepd (enforce=on): the extern step's
// job lease, or the step's lease at its first task and every task's verdict.
// Nothing is thrown across into slurmstepd.
void taskPostFork(StepState& s, const Controller& ctl, spank_t sp);

}  // namespace tally::slurm::plugin
