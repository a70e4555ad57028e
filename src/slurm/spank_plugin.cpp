// tally_spank.so: each Slurm step that declares GPU memory becomes a tally
// lease on its node. The rules are in slurm/step.h; this file is SPANK's entry
// points, each routing to the part that does the work, and every path out of
// the plugin says what happened.
//
// Contexts (spank_context):
// - local (srun) and allocator (sbatch/salloc): the options are checked before
//   anything is allocated; repeated --tally-attr values travel to the remote
//   side in the step's environment (SPANK forwards only an option's last
//   value): spank_options.h.
// - remote (slurmstepd, root): at slurm_spank_init_post_opt the step's facts
//   are fetched in a thread of their own while slurmstepd sets the step up
//   (spank_prefetch.h). At the first task's post-fork, when the task is in its
//   cgroup and has not exec'd, the step's user cgroup is attached to the
//   node's daemon (spank_attach.h), every step of a managed node (a job
//   without the GRES under plugstack.conf's no_gres); a step that is not
//   leased never runs: each task reads the verdict in task_init and a refused
//   one exits before exec (spank_verdict.h says why the task itself). As a
//   leased step's last task exits, the step's stderr says what its bound did
//   and the node's line goes into the job's AdminComment
//   (spank_admin_comment.h); at the step's end the plugin waits (end_wait) for
//   the daemon's outcome row, so the final counters are read before
//   slurmstepd removes the cgroup (spank_step_end.h).
//
// The parts: the step's state, one object every part takes by reference
// (spank_state.h); the calls to slurmctld and the rest of libslurm, spelt per
// Slurm release (spank_controller.h); what SPANK's handle says of the step and
// the node (spank_node.h); the calls to the tally daemon (spank_daemon.h);
// the job's facts, kept or asked (spank_job_facts.h); a phase's timing line
// (spank_timing.h).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <optional>
#include <string>
#include <vector>

#include "slurm/spank_attach.h"
#include "slurm/spank_controller.h"
#include "slurm/spank_options.h"
#include "slurm/spank_prefetch.h"
#include "slurm/spank_state.h"
#include "slurm/spank_step_end.h"
#include "slurm/spank_verdict.h"
#include "slurm/step.h"

extern "C" {
#include <slurm/spank.h>
}

#define TALLY_EXPORT __attribute__((visibility("default")))

extern "C" {
TALLY_EXPORT extern const char plugin_name[] = "tally";
TALLY_EXPORT extern const char plugin_type[] = "spank";
TALLY_EXPORT extern const unsigned int plugin_version = SLURM_VERSION_NUMBER;
}

namespace {

using namespace tally::slurm;
using namespace tally::slurm::plugin;

// The one step this process serves (one step per slurmstepd). SPANK calls
// the functions below with no context of ours, so it is here, static, and
// handed to each part by reference.
StepState g_state;

// SPANK's callback for every option: `id` is the option's val (OptionId).
int onOption(int id, const char* arg, int) {
  storeOption(g_state.options, id, arg);
  return 0;
}

}  // namespace

extern "C" {

TALLY_EXPORT int slurm_spank_init(spank_t sp, int ac, char** av) {
  StepState& s = g_state;
  std::vector<std::string> args(av, av + ac);
  std::vector<std::string> problems;
  s.args = readPluginArgs(args, problems);
  // Remembered, never returned: a failed init under `required` stops slurmd,
  // drains the node at a batch launch and fails every srun/sbatch/salloc of
  // the login nodes, CPU-only users' too. What a typo must stop is only a
  // step that declares GPU memory: spank_attach.cpp refuses each one with
  // this text, so none runs unbounded.
  if (!problems.empty()) s.configError = fmt::format("{}", fmt::join(problems, "; "));
  spank_context_t ctx = spank_context();
  // Said once per node, by slurmd, not on every step.
  if (ctx == S_CTX_SLURMD) {
    if (!s.configError.empty())
      slurm_error(
          "tally: %s; steps that declare GPU memory on this node are refused until "
          "plugstack.conf is fixed (tally doctor --slurm checks it); every other step runs",
          s.configError.c_str());
    for (const auto& w : gresNameWarnings(s.args.gres)) slurm_error("tally: %s", w.c_str());
    if (s.args.batchPoolIgnored)
      slurm_info(
          "tally: batch_pool= in plugstack.conf is ignored: the batch script's step is a child "
          "of its job's lease like every step, and the job's GRES counts once in pool=");
    if (s.args.queueTimeoutUs)
      slurm_info(
          "tally: queue_timeout= in plugstack.conf is ignored: a step is granted at once "
          "or refused, never queued behind tally (Slurm has placed it)");
  }
  // Before slurmstepd forks the tasks: they inherit the mapping, shared.
  if (ctx == S_CTX_REMOTE && !s.verdict) s.verdict = mapVerdict();
  if (ctx == S_CTX_LOCAL || ctx == S_CTX_ALLOCATOR || ctx == S_CTX_REMOTE) {
    s.optionTable = optionTable(onOption);
    // Without its options a step's --gpu-memory-max would go unseen: a step
    // that declares GPU memory is refused as for a typo; the rest run.
    if (!registerOptions(sp, s.optionTable) && s.configError.empty())
      s.configError = "the plugin could not register its options with Slurm";
  }
  return 0;
}

TALLY_EXPORT int slurm_spank_init_post_opt(spank_t sp, int, char**) {
  spank_context_t ctx = spank_context();
  // slurmstepd: at the same point as slurm_spank_init, once the step's
  // options are known (the job's lease may be asked with them).
  if (ctx == S_CTX_REMOTE && g_state.configError.empty() && g_state.args.enforce)
    startPrefetch(g_state, slurmctld(), sp);
  if (ctx != S_CTX_LOCAL && ctx != S_CTX_ALLOCATOR) return 0;
  // srun/sbatch on a node whose plugstack.conf has a typo: only a user who
  // gave a tally option is told (the step is refused where it would run).
  if (!g_state.configError.empty() && declaresAnything(g_state.options, std::nullopt))
    slurm_error("tally: %s", g_state.configError.c_str());
  return submitOptions(g_state.options);
}

TALLY_EXPORT int slurm_spank_task_post_fork(spank_t sp, int, char**) {
  if (!spank_remote(sp) || !g_state.args.enforce) return 0;
  taskPostFork(g_state, slurmctld(), sp);
  return 0;
}

// In each task, as the user, after slurmstepd unblocked it and just before its
// execve: a refused step's task says why and exits without running anything.
TALLY_EXPORT int slurm_spank_task_init(spank_t sp, int, char**) {
  if (spank_remote(sp)) exitIfRefused(g_state.verdict);
  return 0;
}

TALLY_EXPORT int slurm_spank_task_exit(spank_t sp, int, char**) {
  if (spank_remote(sp)) taskExited(g_state, slurmctld(), sp);
  return 0;
}

TALLY_EXPORT int slurm_spank_exit(spank_t sp, int, char**) {
  if (spank_remote(sp)) stepEnded(g_state, sp);
  return 0;
}

}  // extern "C"
