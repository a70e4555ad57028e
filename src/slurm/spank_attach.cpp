#include "slurm/spank_attach.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <optional>
#include <string>
#include <string_view>

#include "rpc/client.h"
#include "rpc/messages.h"
#include "slurm/spank_daemon.h"
#include "slurm/spank_node.h"
#include "slurm/spank_options.h"
#include "slurm/spank_prefetch.h"
#include "slurm/spank_timing.h"
#include "util/units.h"

namespace tally::slurm::plugin {

namespace {

// What bounds the step, for a refusal's line ("step 7.0 declared ..., but"):
// its GRES and flags, or the site's policy for a job without the GRES.
std::string describeBound(const PluginArgs& args, const StepOptions& o,
                          const std::optional<GresFound>& gres) {
  std::string g = gres && gres->count
                      ? fmt::format("--gres={}:{}", gres->name, units::humanBytes(gres->count))
                      : "";
  if (o.gpuMemoryMax && !g.empty())
    return fmt::format("{} --gpu-memory-max={}", g, *o.gpuMemoryMax);
  if (o.gpuMemoryMax) return fmt::format("--gpu-memory-max={}", *o.gpuMemoryMax);
  if (!g.empty()) return g;
  return fmt::format("no {} GRES (this node bounds such jobs too: plugstack.conf's no_gres={})",
                     args.gres.front(), describe(args.noGres));
}

std::string describeJobBound(std::optional<std::uint64_t> bytes) {
  return bytes ? "gpu_memory_max " + units::humanBytes(*bytes) : "metered, no GPU bound";
}

// The extern step's user part (.../step_extern/user: its sleep, and the ssh
// sessions pam_slurm_adopt puts there) as a child lease of the job's: a kill
// at the job's bound takes the job's child leases and never the job's own
// cgroup, which holds slurmstepd (daemon/sampler.cpp), so what is adopted
// there is within its reach. Logged if it fails: the job still runs bounded
// in the kernel.
void leaseExternUser(const StepState& s, spank_t sp, std::uint32_t job, const std::string& jobCg,
                     const JobRecord& record, const std::string& jobLease,
                     const std::string& where) {
  StepFacts facts = factsOf(sp, job, kExternStep);
  facts.gresBytes = record.gres ? record.gres->count : 0;
  takeRecord(facts, record);
  facts.jobCgroup = jobCg;
  facts.cgroup = jobCg + "/step_extern/user";
  facts.jobLease = jobLease;
  auto request = stepRequest(s.args, StepOptions{}, facts);
  if (!request) {
    slurm_error("%s: its extern step's user part: %s", where.c_str(),
                request.error().message.c_str());
    return;
  }
  request->reportsExit = false;  // no task of the user's here: nobody reports its exit
  // Slurm 22.05-24.11 run a sleep there from the start; 26.05 runs none
  // (mgr.c _spawn_job_container), so the cgroup is empty until something is
  // adopted and empties again when the last ssh session ends. Such a lease is
  // kept while empty and ends with the job's (keep_when_empty); asked only
  // then, so the lease on older Slurm is what it always was. Slurm mounts
  // cgroup v2 at /sys/fs/cgroup (cgroup.conf's CgroupMountpoint default), as
  // the daemon reads it.
  const bool empty =
      readText("/sys/fs/cgroup" + facts.cgroup + "/cgroup.events").find("populated 1") ==
      std::string::npos;
  request->keepWhenEmpty = empty;
  auto client = rpc::Client::connect(s.args.socket);
  auto granted = client ? requestLease(*client, s.args, *request, where, "extern-lease")
                        : Result<rpc::api::LeaseReply>(client.error());
  if (!granted) {
    slurm_error(
        "%s: its extern step's user part %s is not a lease (%s): a kill at the job's bound does "
        "not reach what is adopted there",
        where.c_str(), facts.cgroup.c_str(), granted.error().message.c_str());
    return;
  }
  slurm_info(
      "%s: its extern step's user part is tally lease %s on %s, in job lease %s%s", where.c_str(),
      granted->lease.c_str(), facts.cgroup.c_str(), jobLease.c_str(),
      empty ? " (empty until pam_slurm_adopt puts a process there: kept until the job ends)" : "");
}

// The job's lease on this node, made by the extern step (PrologFlags=Contain)
// as the job starts here, so the job's GRES is held from its first moment and
// the extern step's processes (pam_slurm_adopt's ssh sessions) are inside it.
// Nothing to refuse here (the extern step has no task of the user's): a
// failure is logged, and each step asks again and is refused if it fails.
// The granted lease's id goes in `jobLease`.
void leaseJob(const StepState& s, spank_t sp, std::uint32_t job, std::string_view procCgroup,
              const ControllerFacts& asked, std::string& jobLease) {
  std::string where = fmt::format("tally: job {}", job);
  const auto& record = asked.record;
  if (!record) {
    slurm_error("%s: cannot tell whether it holds GRES %s here: %s; its steps ask again",
                where.c_str(), fmt::format("{}", fmt::join(s.args.gres, ",")).c_str(),
                record.error().message.c_str());
    return;
  }
  // A job without the GRES is leased too, under the site's no_gres policy;
  // under a misconfigured plugin (the policy unknown) its steps say why.
  if (!s.configError.empty()) return;
  auto cg = jobCgroup(procCgroup);
  if (!cg) {
    slurm_error("%s: %s", where.c_str(), cg.error().message.c_str());
    return;
  }
  auto granted =
      attachJobLease(s.args, factsOf(sp, job, kExternStep), *record, *cg, StepOptions{}, where);
  if (!granted) return;
  if (!*granted) {
    slurm_error("%s: %s; its steps ask again", where.c_str(), granted->error().message.c_str());
    return;
  }
  jobLease = **granted;
  StepFacts bounded;
  bounded.gresBytes = record->gres ? record->gres->count : 0;
  slurm_info("%s is tally lease %s on %s (%s)", where.c_str(), jobLease.c_str(), cg->c_str(),
             describeJobBound(jobBound(s.args, bounded)).c_str());
  leaseExternUser(s, sp, job, *cg, *record, jobLease, where);
}

// The extern step's post-fork: the job's facts asked, its lease made, and
// the job's record kept once with both.
void leaseJobAtExtern(const StepState& s, const Controller& ctl, spank_t sp) {
  std::uint32_t job = 0;
  spank_get_item(sp, S_JOB_ID, &job);
  std::string procCgroup = readText("/proc/self/cgroup");
  ControllerFacts asked =
      askController(ctl, s.args, job, kExternStep, nodeRef(sp, kExternStep), procCgroup);
  std::string jobLease = asked.record ? asked.record->jobLease : "";
  leaseJob(s, sp, job, procCgroup, asked, jobLease);
  keepRecord(s.args, asked, jobLease, procCgroup);
}

// The first task: lease the step (inside its job's lease when the job holds
// the GRES here), or make sure it never runs. The job's lease, when this step
// learns it, goes in `keptLease`.
int leaseStep(StepState& s, spank_t sp, pid_t task, std::uint32_t job, std::uint32_t step,
              const NodeRef& node, std::string_view procCgroup, const ControllerFacts& asked,
              std::string& keptLease) {
  std::string where = fmt::format("tally: step {}.{}", job, stepName(step));
  attrsFromSubmit(sp, s.options);
  auto fail = [&](const std::string& why) {
    s.failed = true;
    s.failure = why;
    refuseTask(s.verdict, task, why);
    return 0;  // the task refuses itself before exec; spank_verdict.h says why not -1
  };
  if (auto c = checkOptions(s.options); !c) return fail(where + ": " + c.error().message);

  const auto& record = asked.record;
  if (!record) {
    // Unknown is not "none": a step that may have asked for GPU memory is not run unbounded.
    return fail(
        fmt::format("{}: cannot tell whether it asked for GRES {}: {}; the step does not "
                    "start",
                    where, fmt::join(s.args.gres, ","), record.error().message));
  }
  const std::optional<GresFound>& gres = record->gres;
  std::optional<std::uint64_t> gresBytes;
  if (gres) gresBytes = gres->count;
  // plugstack.conf's GRES names may not be the site's (a misspelt gres=): a
  // job that holds any GRES here may hold GPU memory by another name, and
  // must not run unbounded. A job that holds none is a CPU job: under the
  // typo its steps run unleased (below), so a typo never stops a CPU-only job.
  if (s.args.gresUncertain && record->anyGres && !s.configError.empty()) {
    return fail(
        fmt::format("{}: tally_spank.so is misconfigured in plugstack.conf ({}), and the job "
                    "holds GRES on this node that may be GPU memory; the step does not start",
                    where, s.configError));
  }
  if (!s.configError.empty()) {
    // The site's no_gres policy is unknown under a typo: a step that declares
    // nothing runs unleased, as slurmd's log said at its start; a typo never
    // stops a CPU-only job.
    if (!declaresAnything(s.options, gresBytes)) return 0;
    return fail(
        fmt::format("{}: tally_spank.so is misconfigured in plugstack.conf ({}); the step "
                    "does not start",
                    where, s.configError));
  }

  StepFacts facts = factsOf(sp, job, step);
  facts.gresBytes = gresBytes;
  takeRecord(facts, *record);
  // The step's own request matters only inside a job's count.
  if (asked.own) {
    const auto& own = *asked.own;
    if (!own)
      return fail(fmt::format("{}: cannot read its own GRES request: {}; the step does not start",
                              where, own.error().message));
    if (*own) facts.stepGresBytes = (*own)->count;
  }
  auto cg = stepCgroup(procCgroup);
  if (!cg) return fail(fmt::format("{}: {}; the step does not start", where, cg.error().message));
  facts.cgroup = *cg;
  std::string bound = describeBound(s.args, s.options, gres);
  // What the step asks is checked before the daemon is (a flag without a
  // GRES is refused for that, whether or not the daemon answers).
  if (auto checked = stepRequest(s.args, s.options, facts); !checked)
    return fail(fmt::format("{}: {}; the step does not start", where, checked.error().message));

  auto client = rpc::Client::connect(s.args.socket);
  if (!client) {
    return fail(fmt::format("{} declared {}, but {}; the step does not start", where, bound,
                            client.error().message));
  }
  // The job's lease first (the extern step made it, or this step makes or
  // joins it; a step after the job's first here nests in the one its record
  // keeps), then the step's inside it. Every job on a managed node has one:
  // bounded by its GRES, or by the site's no_gres policy.
  auto joined = [&](const Result<std::string>& jobLease) -> std::optional<std::string> {
    if (!jobLease)  // why not
      return fmt::format("{} declared {}, but its job's lease: {}; the step does not start", where,
                         bound, jobLease.error().message);
    facts.jobLease = *jobLease;
    keptLease = facts.jobLease;
    return std::nullopt;
  };
  auto joinJob = [&]() -> std::optional<std::string> {
    auto jobReq = jobRequest(s.args, s.options, facts);
    if (!jobReq)
      return fmt::format("{}: {}; the step does not start", where, jobReq.error().message);
    auto jobLease = requestLease(*client, s.args, *jobReq, where, "job-lease");
    if (!jobLease) return joined(jobLease.error());
    return joined(jobLease->lease);
  };
  auto jobCg = jobCgroup(procCgroup);
  if (!jobCg)
    return fail(fmt::format("{}: {}; the step does not start", where, jobCg.error().message));
  facts.jobCgroup = *jobCg;
  facts.jobLease = record->jobLease;
  // Asked beside slurmstepd's setup for this cgroup (joinJobEarly), or now.
  const auto& early = asked.early;
  if (facts.jobLease.empty())
    if (auto why = early && early->cgroup == facts.jobCgroup ? joined(early->lease) : joinJob())
      return fail(*why);
  auto request = stepRequest(s.args, s.options, facts);
  if (!request)
    return fail(fmt::format("{}: {}; the step does not start", where, request.error().message));
  std::string refused;
  auto granted = requestLease(*client, s.args, *request, where, "step-lease", &refused);
  if (!granted && !record->jobLease.empty() && facts.jobLease == record->jobLease &&
      (refused == rpc::code::kNotFound || refused == rpc::code::kRefused)) {
    // The kept job lease is no parent now (its daemon lost it, or it
    // ended): the job's lease is asked for again, once.
    slurm_info("%s: %s; asking for its job's lease again", where.c_str(),
               granted.error().message.c_str());
    if (auto why = joinJob()) return fail(*why);
    request = stepRequest(s.args, s.options, facts);
    if (!request)
      return fail(fmt::format("{}: {}; the step does not start", where, request.error().message));
    granted = requestLease(*client, s.args, *request, where, "step-lease");
  }
  if (!granted)
    return fail(fmt::format("{} declared {}, but {}; the step does not start", where, bound,
                            granted.error().message));
  LeasedStep& leased = s.leased;
  leased.lease = granted->lease;
  leased.job = job;
  leased.step = step;
  leased.jobLease = facts.jobLease;
  leased.jobNode = node.name;
  if (!gresBytes || !*gresBytes) leased.noGres = NoGresHint{s.args.gres.front(), s.args.noGres};
  std::string what =
      request->declared.declaration.gpuMemoryMax
          ? "gpu_memory_max " + units::humanBytes(*request->declared.declaration.gpuMemoryMax)
          : std::string("metered, no GPU bound");
  if (!facts.jobLease.empty()) what += ", in job lease " + facts.jobLease;
  slurm_info("%s is tally lease %s on %s (%s)", where.c_str(), leased.lease.c_str(),
             facts.cgroup.c_str(), what.c_str());
  return 0;
}

// The step's first task: its job's facts asked (or taken from the prefetch),
// the step leased, and the job's record kept once with what it learnt.
int attachStep(StepState& s, const Controller& ctl, spank_t sp, pid_t task) {
  PhaseTimer timer("first-task-attach");
  std::uint32_t job = 0, step = 0;
  spank_get_item(sp, S_JOB_ID, &job);
  spank_get_item(sp, S_JOB_STEPID, &step);
  // The GRES is asked for even with --gpu-memory-max: the flag only caps it.
  std::string procCgroup = readText(fmt::format("/proc/{}/cgroup", task));
  NodeRef node = nodeRef(sp, step);
  ControllerFacts asked = takeFacts(s, ctl, job, step, node, procCgroup);
  std::string jobLease = asked.record ? asked.record->jobLease : "";
  int rc = leaseStep(s, sp, task, job, step, node, procCgroup, asked, jobLease);
  keepRecord(s.args, asked, jobLease, procCgroup);
  return rc;
}

}  // namespace

void taskPostFork(StepState& s, const Controller& ctl, spank_t sp) {
  std::uint32_t step = 0;
  if (spank_get_item(sp, S_JOB_STEPID, &step) == ESPANK_SUCCESS && step == kExternStep) {
    // slurmstepd calls this once for the extern step, with no task, after
    // forking its sleep (taskid -1).
    if (s.attempted) return;
    s.attempted = true;
    try {
      leaseJobAtExtern(s, ctl, sp);
    } catch (const std::exception& e) {
      slurm_error("tally: job lease at the extern step: %s", e.what());
    }
    return;
  }
  pid_t task = 0;
  if (spank_get_item(sp, S_TASK_PID, &task) != ESPANK_SUCCESS || task <= 0) return;
  if (s.failed) {
    refuseTask(s.verdict, task, s.failure);  // every task of a refused step
    return;
  }
  if (s.attempted) return;
  s.attempted = true;
  try {
    attachStep(s, ctl, sp, task);
  } catch (const std::exception& e) {  // nothing is thrown across into slurmstepd
    s.failed = true;
    s.failure = fmt::format("tally: {}; the step does not start", e.what());
    refuseTask(s.verdict, task, s.failure);
  }
  if (!s.failed && s.verdict) s.verdict->state = Verdict::kProceed;
}

}  // namespace tally::slurm::plugin
