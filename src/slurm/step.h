// One Slurm step as one tally lease: what the SPANK plugin (spank_attach.cpp)
// asks the node's daemon, decided here without Slurm or a socket so every rule
// is a unit test.
//
// Rules (docs/slurm.md):
// - Slurm gives GRES to the job on each node, and every step of the job holds
//   all of it: so the job is the lease that counts. One lease per job per
//   node (its cgroup .../job_J), in the pool, bounded by the job's `tallymem`
//   GRES on this node (count = bytes), made by the extern step
//   (PrologFlags=Contain) or else by the job's first step on the node
//   (attach-or-join: each step asks, the first makes it). Each step is a
//   child lease of it: no pool, bounded by the smaller of the job's count
//   and its own request (its own GRES, --gpu-memory-max). Overlapping,
//   interactive and parallel steps so count the job's GRES once.
// - Placement is Slurm's: --gpu-memory-max only caps the GRES (the smaller
//   counts) and without a GRES is refused; --tally-pool reaches only the
//   pools plugstack.conf allows; a lease is granted now or refused with the
//   daemon's reason, never queued behind tally while slurmstepd waits.
// - A job that holds none of the GRES on the node gets the site's policy
//   (NoGresPolicy: no GPU memory by default, a site cap, or meter-only) as
//   its job lease's bound: the site declared that limit in plugstack.conf,
//   so every job on a managed node is bounded and Slurm's placement holds.
//   Where the plugin is misconfigured (its policy unknown), a step that
//   declares nothing runs unleased: a typo never stops a CPU-only job.
// - A job's allocation on this node is asked of slurmctld once, by its extern
//   or first step here, and kept for its other steps (slurm/job_store.h): a
//   step of a job that holds no GRES here asks the controller nothing.
// - A step of a managed node that cannot be leased does not start (the daemon
//   down, a refusal, an unknown GRES): fail closed.
// - The lease is the step's `user` cgroup (cgroup/v2: .../job_J/step_S/user,
//   above task_*), so every task is metered and a kill takes the tasks, never
//   slurmstepd (in .../step_S/slurm).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "enforce/gpu_bound.h"
#include "rpc/lease_api.h"
#include "slurm/job_record.h"
#include "util/result.h"

namespace tally::slurm {

// What a job that holds none of the GRES on a managed node (enforce=on) gets
// (plugstack.conf no_gres=): Slurm gives a count-only GRES to no job that did
// not ask (there is no ConstrainDevices for it), so the plugin does. Every
// job on the node is then a lease, and a step that never touches the GPU
// runs as before.
struct NoGresPolicy {
  enum class Kind {
    kRefuse,  // no_gres=refuse (the default): no GPU memory, each allocation refused
    kCap,     // no_gres=SIZE: at most capBytes (only in a pool without a GPU budget)
    kMeter,   // no_gres=meter: metered, no bound (the pool must have no GPU budget)
  };
  Kind kind = Kind::kRefuse;
  std::uint64_t capBytes = 0;
};
// "refuse", "meter", or the cap's size ("64.0 MiB"), as messages say it
// (the lease's slurm_no_gres attribute has the cap in bytes).
std::string describe(const NoGresPolicy& p);

// plugstack.conf arguments: `optional tally_spank.so socket=/run/tally/tally.sock pool=slurm`.
struct PluginArgs {
  std::string socket = "/run/tally/tally.sock";
  std::string pool = "slurm";  // the pool a step's lease joins
  // batch_pool= is still read (a plugstack line written for an older plugin
  // must not stop slurmd) but ignored: the batch step is a child of the job's
  // lease like any other step, counted once with it.
  bool batchPoolIgnored = false;
  // The count-only GRES that means GPU memory bytes: tally's own name by
  // default; a comma list is read in order (the first the job holds counts),
  // so a cluster can move from an older name without a flag day.
  std::vector<std::string> gres = {"tallymem"};
  std::uint64_t timeoutUs = 10'000'000;  // the daemon's first answer
  // Pools a step may name with --tally-pool besides `pool` (allowed_pools=a,b).
  std::vector<std::string> allowedPools;
  // queue_timeout= is still read (a plugstack line written for an older
  // plugin must not stop every step) but a step never waits: it is ignored.
  std::optional<std::uint64_t> queueTimeoutUs;
  std::uint64_t endWaitUs = 10'000'000;  // at step end: wait for the outcome row
  // enforce=off: a node without the GRES (a login or CPU node sharing
  // plugstack.conf): the options are accepted, nothing is asked or leased.
  bool enforce = true;
  // Where a job's GRES on this node is kept for its other steps (root-only,
  // one file per job: slurm/job_record.h), so only a job's first step here
  // asks slurmctld; empty (job_cache=off): every step asks.
  std::string jobCache = "/run/tally-slurm";
  // A problem that may have been meant for gres= (gres= itself bad, an
  // unknown key, an argument that is not KEY=VALUE): the GRES names above are
  // the defaults, maybe not the site's. Then any step whose job holds any
  // GRES on the node is refused (it may be GPU memory by another name), and
  // no record is kept or used.
  bool gresUncertain = false;
  NoGresPolicy noGres;
  // admin_comment=on: each node's line goes into the job's AdminComment
  // (two slurmctld calls as a step ends whose line changed). Off by default:
  // site tools (jobstats) write AdminComment too, and the ledger has it all.
  bool adminComment = false;
};
// Each argument is KEY=VALUE of the keys above (socket, pool,
// allowed_pools, gres, timeout, queue_timeout, end_wait, enforce, job_cache,
// no_gres, admin_comment).
// Every unknown key or bad value is a problem naming it, all of them in one
// pass; a bad key keeps its default and the good ones apply. The plugin runs
// on that (a typo refuses the steps that declare GPU memory, never slurmd or
// a CPU-only step: spank_plugin.cpp); checkers take parsePluginArgs, which
// fails on any problem with every one of them in its message.
PluginArgs readPluginArgs(const std::vector<std::string>& args, std::vector<std::string>& problems);
Result<PluginArgs> parsePluginArgs(const std::vector<std::string>& args);

// What slurmd's log should say at init about the GRES names: one sentence per
// name Slurm already means something by (its own TRES such as gres/gpumem,
// which 23.02+ adds and fills from gpu/rsmi whenever gres/gpu is accounted)
// or that starts with `gpu` (Slurm's GPU family: its accounting and
// --gpus options treat such names as GPUs). Empty when all is well.
std::vector<std::string> gresNameWarnings(const std::vector<std::string>& names);

// The step's own words (srun/sbatch options), raw as Slurm hands them over.
struct StepOptions {
  std::optional<std::string> gpuMemoryMax, gpuMemoryHigh, pool;
  std::vector<std::string> attrs;  // KEY=VALUE, repeatable
};
// Checks every option (sizes, pool name, attributes) so srun refuses a typo
// before it allocates anything.
Status checkOptions(const StepOptions& o);

// Slurm's step ids for the batch script and the extern step (slurm.h's
// SLURM_BATCH_SCRIPT and SLURM_EXTERN_CONT).
inline constexpr std::uint32_t kBatchStep = 0xfffffffb, kExternStep = 0xfffffffc;
std::string stepName(std::uint32_t step);  // "0", "batch", "extern"

// What slurmstepd knows of the step.
struct StepFacts {
  std::uint32_t jobId = 0, stepId = 0;
  std::string user;  // from the job's uid (S_JOB_UID), never from the environment
  std::string partition, account;
  // A job array's master id and this job's index in it; absent outside an array.
  std::optional<std::uint32_t> arrayJobId, arrayTaskId;
  // A heterogeneous job's leader and this component's offset, from the job's record.
  std::optional<HetJob> het;
  // The job's GRES on this node in bytes, when it holds it.
  std::optional<std::uint64_t> gresBytes;
  // The step's own GRES request per node, when it made one (a step may ask
  // for less than its job holds).
  std::optional<std::uint64_t> stepGresBytes;
  std::string cgroup;     // the step's user cgroup (stepCgroup)
  std::string jobCgroup;  // the job's cgroup on this node (jobCgroup)
  std::string jobLease;   // the job's lease on this node, once made or joined
};

// What the job's record (slurmctld's word) says of every lease of the job:
// its heterogeneous job, account and partition.
void takeRecord(StepFacts& f, const JobRecord& r);

// Whether the step declared anything tally-related (a bound, a GRES,
// --tally-pool, --tally-attr): under a misconfigured plugin only those
// steps are refused.
bool declaresAnything(const StepOptions& o, std::optional<std::uint64_t> gresBytes);

// The job's bound on this node: its GRES count when it holds the GRES, else
// the site's no_gres policy (absent: meter-only).
std::optional<std::uint64_t> jobBound(const PluginArgs& args, const StepFacts& f);

// The attach-or-join request for the job's lease on this node: its cgroup,
// the pool, bounded by jobBound (its GRES, or the site's no_gres policy).
Result<rpc::api::Attach> jobRequest(const PluginArgs& args, const StepOptions& o,
                                    const StepFacts& f);

// The attach request for the step; its options were checked (checkOptions).
// With f.jobLease, a child of the job's lease (no pool; bounded by the
// smaller of jobBound and the step's own request); without, a lease of its
// own in the pool, bounded the same way.
Result<rpc::api::Attach> stepRequest(const PluginArgs& args, const StepOptions& o,
                                     const StepFacts& f);

// The step's user cgroup from a task's /proc/<pid>/cgroup text:
// ".../job_1/step_0/user/task_0" -> ".../job_1/step_0/user". Anything else
// (cgroup v1, another layout) is an error saying what to configure.
Result<std::string> stepCgroup(std::string_view procCgroupText);

// What the step's GPU bound did, from the daemon's view of its lease (the
// `lease` query's reply: the kernel's refusal counters under gpu, the bound
// under declared, the ledger's gpu-bound rows).
struct StepBound {
  std::optional<enforce::BoundEvent> kill;  // the gpu-bound kill row, if any
  // A step's job lease killed its steps at the job's bound (the reply's
  // parent_view has the kill row): the step died with its job.
  std::optional<enforce::BoundEvent> jobKill;
  std::uint64_t refused = 0, refusedBytes = 0;
  std::optional<std::uint64_t> max;   // declared gpu_memory_max
  std::optional<std::uint64_t> peak;  // the live lease's GPU peak (gpu.peak_bytes), when known
};
// The one reader of that reply for the plugin (and of its parent_view, the
// job's lease, for jobKill); a malformed field is an error naming it (the
// plugin then says nothing rather than something wrong).
Result<StepBound> stepBoundFromLease(const nlohmann::json& lease);

// The lines slurmstepd prints on the step's stderr as its tasks end, where
// Slurm prints its own "Detected 1 oom_kill event": the allocations the
// kernel refused ("tally: StepId=42.0: 3 GPU allocations refused in the
// kernel at gpu_memory_max 64.0 MiB (384.0 MiB asked)") and a kill ("tally:
// StepId=42.0 killed: GPU memory 128.0 MiB over gpu_memory_max 64.0 MiB").
// A step killed with its job at the job's bound: "tally: StepId=42.0 killed
// with its job: the job's GPU memory 130.0 MiB over its gpu_memory_max 64.0
// MiB on this node". None when the bound did neither.
// `noGres`: the job holds none of the GRES here and ran under the site's
// policy: the lines then say so and how to ask for GPU memory.
struct NoGresHint {
  std::string gres;  // the GRES to ask for (plugstack.conf's first name)
  NoGresPolicy policy;
};
std::vector<std::string> boundLines(std::uint32_t job, std::uint32_t step, const StepBound& b,
                                    const std::optional<NoGresHint>& noGres = std::nullopt);

// The job's one line for Slurm's AdminComment from this node, as its job
// lease stands when the job ends here ("tally node1: GPU peak 512.0 MiB of
// 768.0 MiB; 2 GPU allocations refused in the kernel (1.0 GiB asked)"); the
// peak unknown is said, never 0.
std::string jobSummary(std::string_view node, const StepBound& job);

// AdminComment with this node's line in place of its earlier one (segments
// " | " apart; what anyone else wrote is kept), so each node of a job adds its own.
std::string mergeAdminComment(std::string_view existing, std::string_view node,
                              std::string_view line);

// The step's wait status as one: the first task killed by a signal, else
// the highest exit code (what sacct's ExitCode shows). `statuses` are
// waitpid statuses (S_TASK_EXIT_STATUS); empty: absent.
std::optional<rpc::api::Exited> stepExit(const std::string& lease,
                                         const std::vector<int>& statuses);

// The lease's name: "slurm-<job>.<step>"; the job's: "slurm-<job>".
std::string leaseName(std::uint32_t job, std::uint32_t step);
std::string jobLeaseName(std::uint32_t job);

// The job's cgroup from any of its processes' /proc/<pid>/cgroup text
// (a task's, or slurmstepd's own): ".../job_1/step_0/user/task_0" and
// ".../job_1/step_extern/slurm" -> ".../job_1". Slurm 26.05 names the job's
// cgroup by its SLUID unless cgroup.conf says CgroupJobIdPaths=yes
// (cgroup_v2.c cgroup_p_step_create): ".../sEBHM95T5EZZ00/step_0/user/task_0"
// -> ".../sEBHM95T5EZZ00".
Result<std::string> jobCgroup(std::string_view procCgroupText);
// A job cgroup's own name: "job_<digits>", or a SLUID ("s" and 13 of
// Crockford's base32).
bool jobCgroupLeaf(std::string_view leaf);

}  // namespace tally::slurm
