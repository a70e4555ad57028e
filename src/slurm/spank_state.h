// Everything the plugin holds for the one step its process serves (one step
// per slurmstepd; srun and sbatch use only the arguments and options). One
// instance, owned by the SPANK entry points (spank_plugin.cpp: SPANK calls C
// functions with no context of ours, so that instance is static), is passed
// by reference to each part; no part keeps state of its own.
#pragma once

#include <cstdint>
#include <future>
#include <optional>
#include <string>
#include <vector>

#include "slurm/spank_job_facts.h"
#include "slurm/spank_options.h"
#include "slurm/spank_verdict.h"
#include "slurm/step.h"

namespace tally::slurm::plugin {

// The step as leased at its first task (spank_attach.cpp); lease "" when it
// was not.
struct LeasedStep {
  std::string lease;                // the lease id once attached
  std::uint32_t job = 0, step = 0;  // its Slurm ids
  std::string jobLease, jobNode;    // the step's job lease, and this node's name
  // The job holds none of the GRES here: it runs under the site's policy,
  // which the step's stderr names when the bound refuses or kills.
  std::optional<NoGresHint> noGres;
};

// The step's tasks on this node as they exit (spank_step_end.cpp).
struct TaskExits {
  std::uint32_t exited = 0;   // this node's tasks of the step that have exited
  std::vector<int> statuses;  // ... and their wait statuses
  bool told = false;          // the daemon answered the tasks' exit report
};

struct StepState {
  PluginArgs args;
  std::string configError;     // plugstack.conf's arguments did not parse
  StepOptions options;         // the step's own words
  OptionTable optionTable{};   // what SPANK was told of the options (it may keep pointers)
  Verdict* verdict = nullptr;  // shared with the forked tasks (slurmstepd only)
  // askController for this step (and joinJobEarly), started at
  // slurm_spank_init_post_opt (spank_prefetch.h); the first post-fork takes
  // it, and slurm_spank_exit joins it if no task was ever forked.
  std::future<ControllerFacts> prefetch;
  bool attempted = false;  // the first task's post-fork ran
  bool failed = false;     // a declared step could not be leased: no task may run
  std::string failure;     // why
  LeasedStep leased;
  TaskExits exits;
};

}  // namespace tally::slurm::plugin
