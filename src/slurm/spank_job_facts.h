// What a step needs of slurmctld: its job's record here (its GRES: as an
// earlier step of the job here, or its extern step, kept it in job_cache=,
// else from slurmctld) and, when the job holds the GRES, the step's own
// request; and the record kept for the job's other steps once the step's
// attach is done.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "slurm/gres.h"
#include "slurm/job_record.h"
#include "slurm/spank_controller.h"
#include "slurm/step.h"
#include "util/result.h"

namespace tally::slurm::plugin {

struct ControllerFacts {
  Result<JobRecord> record = Error{0, "not asked"};
  bool fromSlurmctld = false;  // not kept yet: keepRecord keeps it for the job's other steps
  std::optional<Result<std::optional<GresFound>>> own;  // asked with a GRES
  // The job's lease, attached or joined beside slurmstepd's setup
  // (joinJobEarly, spank_prefetch.cpp) for the job's cgroup `cgroup`; absent
  // when not asked there.
  struct EarlyJobLease {
    std::string cgroup;
    Result<std::string> lease;
  };
  std::optional<EarlyJobLease> early;
};

// Only the job's first step here waits on the controller for the job: a
// job's allocation on a node does not change while it runs. No file is
// written here (askController runs in the prefetch thread): keepRecord does.
// `beside`, when given, runs once the job's record is known, while the
// step's own request is asked in a thread of its own (the prefetch's job
// lease: one call to the daemon and one to slurmctld at once).
// `procCgroup` is a /proc/<pid>/cgroup text of a process in the job's cgroup
// here (slurmstepd's or a task's): the kept record is this run's only.
ControllerFacts askController(const Controller& ctl, const PluginArgs& args, std::uint32_t job,
                              std::uint32_t step, const NodeRef& node, std::string_view procCgroup,
                              const std::function<void(ControllerFacts&)>& beside = {});

// The kernel's id of the job's cgroup from a /proc/<pid>/cgroup text of one of
// its processes; 0 when it cannot be told.
std::uint64_t jobCgroupIdOf(std::string_view procCgroup);

// The job's record here (job_cache=), written once per step at most, as the
// step's attach ends: what slurmctld gave (the job's first step here) with
// the job's lease once one is granted, for the job's later steps, which then
// ask neither slurmctld nor the daemon for the job. Records of jobs gone from
// beside the job's cgroup go as a new job's is written.
void keepRecord(const PluginArgs& args, const ControllerFacts& f, const std::string& jobLease,
                std::string_view procCgroup);

}  // namespace tally::slurm::plugin
