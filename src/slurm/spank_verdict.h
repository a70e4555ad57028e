// Whether a step's tasks may run, decided by slurmstepd at the first task's
// post-fork and carried out by each task in task_init.
//
// slurmstepd forks every task, calls each post-fork, and only then lets the
// tasks go on to exec; each task calls task_init just before its execve. So
// the verdict goes into a page shared by slurmstepd and its forked tasks
// (mapped at init, before any fork), and each task reads it in task_init:
// refused, it prints the reason on its own stderr (which srun and a batch
// job's output file show) and exits 1 without exec'ing. The task exits
// itself rather than relying on Slurm: an `optional` plugin's failure is
// ignored, and under `required` a failed post-fork is a "launch failure"
// after which srun 22.05 exits 0; a task killed from outside loses its
// stderr when srun exits first. (Should the page be unavailable, the task is
// killed before exec instead.)
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace tally::slurm::plugin {

// The step's verdict, shared with the forked tasks (MAP_SHARED, mapped before
// they exist). Written by slurmstepd in post-fork; read by each task after
// slurmstepd unblocked it, which orders the write before the read.
struct Verdict {
  enum : std::uint32_t { kUndecided = 0, kProceed = 1, kRefused = 2 };
  std::uint32_t state;
  char reason[3072];
};

// The shared page, zeroed (undecided); null when it cannot be mapped.
Verdict* mapVerdict();

// A refusal reaches slurmd's log here and the user through the task itself
// (exitIfRefused); without the shared page (`verdict` null) the task is
// killed before exec.
void refuseTask(Verdict* verdict, pid_t task, const std::string& why);

// In a task, just before its execve: a refused step's task says why on its
// stderr and exits 1 (not a return: Slurm ignores an `optional` plugin's -1
// there). Returns when the step was not refused.
void exitIfRefused(const Verdict* verdict);

}  // namespace tally::slurm::plugin
