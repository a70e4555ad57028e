// What the plugin reads of the step and this node through SPANK's handle
// (items, the step's environment, slurmstepd's own) and /proc: where this node is in the job's
// node list, and the step's facts as slurmstepd holds them.
#pragma once

#include <cstdint>
#include <string>

#include "slurm/spank_controller.h"
#include "slurm/step.h"

extern "C" {
#include <slurm/spank.h>
}

namespace tally::slurm::plugin {

// A variable of the step's environment; "" when it is unset.
std::string getenvOf(spank_t sp, const char* name);

// Where this node is in the job's node list: by its name, the one slurmstepd
// holds in its own process environment (SLURMD_NODENAME, set from slurmd's
// configuration; the step's environment that spank_getenv reads is what srun
// sent, so it is never asked). Only were that unset: the extern step's
// S_JOB_NODEID, which counts in the job's nodes, or the batch script's first.
NodeRef nodeRef(spank_t sp, std::uint32_t step);

// Slurm's facts of the step as slurmstepd holds them; the user from the
// job's uid (slurmstepd's own item), not an environment variable a job could
// have set. The account and partition come with the job's record
// (takeRecord).
StepFacts factsOf(spank_t sp, std::uint32_t job, std::uint32_t step);

// A small file's text, such as /proc/<pid>/cgroup (its first read, at most
// 4 KiB); "" when it cannot be read.
std::string readText(const std::string& path);

}  // namespace tally::slurm::plugin
