// The step's facts fetched ahead (slurmstepd only). What the step needs of
// slurmctld (its job's GRES here, its own request), and on a job's first step
// here its job's lease from the daemon, is asked at
// slurm_spank_init_post_opt, in a thread of its own, so the answer comes
// while slurmstepd sets the step up rather than after; the first post-fork
// takes it, waiting if it is still on its way. From 23.02 on the thread's
// slurmctld calls wait out the windows in which slurmstepd runs with the
// user's ids (auth_setuid_lock() in drop_privileges(): its I/O setup to
// srun, user_init, the fork), so there the fetch overlaps only the rest of
// the setup (22.05: all of it). Held past slurmctld's MessageTimeout (a
// barrier in user_init, 26.05, seen in the VM twice; no test holds it, as
// whether the fetch is still on its way then is a race) the federation query
// that opens slurm_load_job failed, slurm_load_job asked for the job alone
// on a new connection, and the step ran.
// Slurm's own locks are re-made in a forked child (pthread_atfork), as
// slurmstepd forks its tasks beside threads of its own.
#pragma once

#include <cstdint>
#include <string_view>

#include "slurm/spank_controller.h"
#include "slurm/spank_job_facts.h"
#include "slurm/spank_state.h"

extern "C" {
#include <slurm/spank.h>
}

namespace tally::slurm::plugin {

// Starts the fetch into s.prefetch (not for the extern step, nor twice). What
// the thread needs of SPANK's handle and of `s` is read and copied here: the
// handle stays in this thread and the thread touches nothing of `s`. Without
// a thread, nothing starts: the post-fork asks itself.
void startPrefetch(StepState& s, const Controller& ctl, spank_t sp);

// The step's facts: the prefetch's answer (waiting for it) when one was
// started, else asked now (`procCgroup`: the first task's /proc/<pid>/cgroup).
ControllerFacts takeFacts(StepState& s, const Controller& ctl, std::uint32_t job,
                          std::uint32_t step, const NodeRef& node, std::string_view procCgroup);

// Waits for a fetch no task took, so no thread outlives the plugin.
void joinPrefetch(StepState& s);

}  // namespace tally::slurm::plugin
