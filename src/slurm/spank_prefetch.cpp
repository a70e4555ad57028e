#include "slurm/spank_prefetch.h"

#include <fmt/format.h>

#include <string>
#include <string_view>
#include <system_error>

#include "slurm/spank_daemon.h"
#include "slurm/spank_node.h"
#include "slurm/spank_timing.h"

namespace tally::slurm::plugin {

namespace {

// The job's lease on this node, asked in the prefetch thread on the job's
// first step here when no extern step made it (no PrologFlags=Contain): no
// lease of it is kept (a job without the GRES is leased under no_gres too). slurmstepd is already
// in the job's cgroup at slurm_spank_init (".../job_J/step_S/slurm"), so the
// cgroup exists and holds a process, and the daemon's attach runs beside the
// step's setup instead of on its first task's path. Absent where it cannot
// be asked here (the post-fork then asks, and says why if it fails); a
// failure here is the step's, said by the post-fork as if it had asked.
std::optional<ControllerFacts::EarlyJobLease> joinJobEarly(const PluginArgs& args, bool configured,
                                                           const ControllerFacts& f,
                                                           StepFacts facts,
                                                           std::string_view procCgroup,
                                                           const StepOptions& options) {
  const auto& record = f.record;
  if (!record || !record->jobLease.empty() || !configured || !checkOptions(options))
    return std::nullopt;
  auto cg = jobCgroup(procCgroup);
  // slurmstepd in this job's cgroup: job_J by its id; a SLUID (26.05) is this
  // job's alone, and jobCgroup() checked its form.
  if (!cg || (cg->substr(cg->rfind('/') + 1).starts_with("job_") &&
              !cg->ends_with(fmt::format("/job_{}", facts.jobId))))
    return std::nullopt;
  std::string where = fmt::format("tally: job {}", facts.jobId);
  auto granted = attachJobLease(args, std::move(facts), *record, *cg, options, where);
  if (!granted) return std::nullopt;
  return ControllerFacts::EarlyJobLease{*cg, std::move(*granted)};
}

}  // namespace

void startPrefetch(StepState& s, const Controller& ctl, spank_t sp) {
  std::uint32_t job = 0, step = 0;
  if (s.prefetch.valid() || spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS || step == kExternStep)
    return;
  NodeRef node = nodeRef(sp, step);
  StepFacts facts = factsOf(sp, job, step);
  std::string procCgroup = readText("/proc/self/cgroup");
  try {
    s.prefetch =
        std::async(std::launch::async, [&ctl, job, step, node, facts, procCgroup, args = s.args,
                                        configured = s.configError.empty(), options = s.options] {
          try {
            return askController(ctl, args, job, step, node, procCgroup, [&](ControllerFacts& f) {
              f.early = joinJobEarly(args, configured, f, facts, procCgroup, options);
            });
          } catch (const std::exception& e) {  // nothing is thrown across into slurmstepd
            ControllerFacts failed;
            failed.record = Error{0, e.what()};
            return failed;
          }
        });
  } catch (const std::system_error& e) {  // no thread: the post-fork asks itself
    slurm_info("tally: step %u.%s: %s; slurmctld is asked at the first task", job,
               stepName(step).c_str(), e.what());
  }
}

ControllerFacts takeFacts(StepState& s, const Controller& ctl, std::uint32_t job,
                          std::uint32_t step, const NodeRef& node, std::string_view procCgroup) {
  if (s.prefetch.valid()) {
    PhaseTimer timer("prefetch-wait");
    return s.prefetch.get();
  }
  return askController(ctl, s.args, job, step, node, procCgroup);
}

void joinPrefetch(StepState& s) {
  if (s.prefetch.valid()) s.prefetch.wait();
}

}  // namespace tally::slurm::plugin
