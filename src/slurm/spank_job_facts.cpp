#include "slurm/spank_job_facts.h"

#include <future>
#include <system_error>

#include "fs/root.h"
#include "slurm/job_store.h"

extern "C" {
#include <slurm/spank.h>
}

namespace tally::slurm::plugin {

std::uint64_t jobCgroupIdOf(std::string_view procCgroup) {
  auto cg = jobCgroup(procCgroup);
  return cg ? cgroupIdOf(std::string(fs::kCgroupRoot) + *cg) : 0;
}

ControllerFacts askController(const Controller& ctl, const PluginArgs& args, std::uint32_t job,
                              std::uint32_t step, const NodeRef& node, std::string_view procCgroup,
                              const std::function<void(ControllerFacts&)>& beside) {
  ControllerFacts f;
  if (auto kept = args.gresUncertain
                      ? std::nullopt
                      : findJobRecord(args.jobCache, job, jobCgroupIdOf(procCgroup), args.gres)) {
    f.record = std::move(*kept);
  } else {
    f.record = ctl.jobRecord(job, node, args.gres);
    f.fromSlurmctld = static_cast<bool>(f.record);
  }
  const bool askOwn = step != kExternStep && f.record && f.record->gres && f.record->gres->count;
  std::future<Result<std::optional<GresFound>>> own;
  if (askOwn && beside) {
    try {
      own = std::async(std::launch::async, ctl.stepGres, job, step, args.gres);
    } catch (const std::system_error&) {  // no thread: asked after `beside`
    }
  }
  if (beside) beside(f);
  if (askOwn) f.own = own.valid() ? own.get() : ctl.stepGres(job, step, args.gres);
  return f;
}

void keepRecord(const PluginArgs& args, const ControllerFacts& f, const std::string& jobLease,
                std::string_view procCgroup) {
  if (!f.record || args.jobCache.empty() || args.gresUncertain) return;
  if (!f.fromSlurmctld && f.record->jobLease == jobLease) return;  // kept as it is
  JobRecord record = *f.record;
  record.jobLease = jobLease;
  // This run of the job here: a requeued job's steps find none of it.
  if (f.fromSlurmctld) record.cgroupId = jobCgroupIdOf(procCgroup);
  std::string jobsDir;
  if (auto cg = jobCgroup(procCgroup); f.fromSlurmctld && cg && cg->rfind('/') != std::string::npos)
    jobsDir = std::string(fs::kCgroupRoot) + cg->substr(0, cg->rfind('/'));
  if (auto kept = keepJobRecord(args.jobCache, record, jobsDir); !kept)
    slurm_info("tally: %s; the job's other steps here ask again", kept.error().message.c_str());
}

}  // namespace tally::slurm::plugin
