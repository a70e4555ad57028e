// The SPANK plugin's seam to libslurm: what it asks slurmctld (a job's record,
// a step's own request, the job's AdminComment, an update of it) and the one
// other libslurm call it makes (expanding a hostlist), as one struct of
// functions. The plugin's other parts call these, never libslurm, and the
// calls whose arguments changed between Slurm releases are spelt per release
// (SLURM_VERSION_NUMBER) in spank_controller.cpp alone.
//
// Slurm's API is resolved from the process that loads the plugin (srun,
// slurmstepd), as for Slurm's own plugins: the plugin links no Slurm library
// of its own.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "slurm/gres.h"
#include "slurm/job_record.h"
#include "util/result.h"

namespace tally::slurm::plugin {

// Where this node is in the job's node list: by its name, else by its index
// there (spank_node.h's nodeRef says how each step finds it).
struct NodeRef {
  std::string name;
  int jobIndex = -1;
};

// The job's AdminComment as slurmctld holds it ("" when it has none) and the
// node its batch script runs on.
struct JobComment {
  std::string comment, batchHost;
};

struct Controller {
  // The job's record as this node needs it: its allocation here is
  // gres_detail_str at the node's index in the job's node list, found by the
  // node's name; else the job's per-node request. The GPU memory GRES is the
  // first of `names` it holds. The record also says whether the job is a
  // heterogeneous job's component (no SPANK item does). An error when
  // slurmctld cannot be asked.
  Result<JobRecord> (*jobRecord)(std::uint32_t job, const NodeRef& node,
                                 const std::vector<std::string>& names);
  // The step's own GRES request per node, when it made one (a step may ask
  // for less than its job holds); none when slurmctld does not say (the
  // job's count then bounds the step).
  Result<std::optional<GresFound>> (*stepGres)(std::uint32_t job, std::uint32_t step,
                                               const std::vector<std::string>& names);
  // The job's AdminComment and BatchHost; an error (errno's) when slurmctld
  // cannot be asked.
  Result<JobComment> (*adminComment)(std::uint32_t job);
  // Replaces the job's AdminComment; an error (errno's) when slurmctld refused.
  Status (*setAdminComment)(std::uint32_t job, const std::string& comment);
  // setAdminComment's error code when the job had already finished.
  int jobFinished;
};

// The controller of the Slurm release the plugin was built for.
const Controller& slurmctld();

}  // namespace tally::slurm::plugin
