// What the plugin reads of the step and this node through SPANK's handle
// (items, the step's environment) and /proc: where this node is in the job's
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

// Where this node is in the job's node list: by its name, else by its index
// there. The step's environment SPANK sees has no SLURMD_NODENAME (the tasks
// get it, later; found with two slurmd in the VM), so the name is the step's
// own node list (SLURM_STEP_NODELIST) at S_JOB_NODEID, which counts from the
// step's nodes. The extern step has no such list, but it runs on all of the
// job's nodes, so its S_JOB_NODEID is the node's index in the job's list; the
// batch script runs on the job's first node.
NodeRef nodeRef(spank_t sp, std::uint32_t step, const Controller& ctl);

// A heterogeneous job's component: the node at S_JOB_NODEID in the
// component's own node list (SLURM_JOB_NODELIST_HET_GROUP_<offset>, spelt
// _PACK_GROUP_ in 22.05), its offset from the job's record.
std::string hetComponentNode(spank_t sp, std::uint32_t offset, const Controller& ctl);

// Slurm's facts of the step as slurmstepd holds them; the user from the
// job's uid (slurmstepd's own item), not an environment variable a job could
// have set.
StepFacts factsOf(spank_t sp, std::uint32_t job, std::uint32_t step);

// A small file's text, such as /proc/<pid>/cgroup (its first read, at most
// 4 KiB); "" when it cannot be read.
std::string readText(const std::string& path);

}  // namespace tally::slurm::plugin
