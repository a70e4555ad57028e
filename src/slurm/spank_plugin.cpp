// tally_spank.so: each Slurm step that declares GPU memory becomes a tally
// lease on its node. The rules are in slurm/step.h; this file is the glue to
// SPANK and to slurmctld, and every path out of it says what happened.
//
// Contexts (spank_context):
// - local (srun) and allocator (sbatch/salloc): the options are checked before
//   anything is allocated; repeated --tally-attr values travel to the remote
//   side in the step's environment (SPANK forwards only an option's last value).
// - remote (slurmstepd, root): at the first task's post-fork, when the task is
//   in its cgroup and has not exec'd, the step's user cgroup is attached to the
//   node's daemon. A step that declared a bound and is not leased never runs.
//   slurmstepd forks every task, calls each post-fork, and only then lets the
//   tasks go on to exec; each task calls task_init just before its execve. So
//   the verdict goes into a page shared by slurmstepd and its forked tasks
//   (mapped at init, before any fork), and each task reads it in task_init:
//   refused, it prints the reason on its own stderr (which srun and a batch
//   job's output file show) and exits 1 without exec'ing. The task exits
//   itself rather than relying on Slurm: an `optional` plugin's failure is
//   ignored, and under `required` a failed post-fork is a "launch failure"
//   after which srun 22.05 exits 0; a task killed from outside loses its
//   stderr when srun exits first. (Should the page be unavailable, the task is
//   killed before exec instead.) At the step's
//   end the plugin waits (end_wait) for the daemon's outcome row, so the final
//   counters are read before slurmstepd removes the cgroup. As a leased step's
//   last task exits, the node's line goes into the job's AdminComment.
//   What the step needs of slurmctld (its job's GRES here, its own request),
//   and on a job's first step here its job's lease from the daemon, is asked
//   at slurm_spank_init_post_opt, in a thread of its own, so the answer comes
//   while slurmstepd sets the step up (its I/O to srun, the fork) rather
//   than after; the first post-fork takes it, waiting if it is still on its
//   way. Slurm's own locks are re-made in a forked child
//   (pthread_atfork), as slurmstepd forks its tasks beside threads of its own.
//
// Slurm's API (slurm_get_job_steps, slurm_load_job, slurm_update_job) and SPANK's functions are
// resolved from the process that loads the plugin (srun, slurmstepd), as for
// Slurm's own plugins: the plugin links no Slurm library of its own.
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <pwd.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <string>
#include <vector>

#include "fs/root.h"
#include "rpc/client.h"
#include "rpc/messages.h"
#include "slurm/gres.h"
#include "slurm/job_store.h"
#include "slurm/step.h"
#include "util/units.h"

extern "C" {
#include <slurm/slurm.h>
#include <slurm/spank.h>
}

#define TALLY_EXPORT __attribute__((visibility("default")))

extern "C" {
TALLY_EXPORT extern const char plugin_name[] = "tally";
TALLY_EXPORT extern const char plugin_type[] = "spank";
TALLY_EXPORT extern const unsigned int plugin_version = SLURM_VERSION_NUMBER;
}

namespace {

using namespace tally;

// The environment variable that carries every --tally-attr to slurmstepd,
// joined by an ASCII unit separator (attribute values hold no control characters).
constexpr const char* kAttrsEnv = "TALLY_SPANK_ATTRS";
constexpr char kAttrSep = '\x1f';

// One step per slurmstepd: these live for that step.
slurm::StepOptions g_options;
slurm::PluginArgs g_args;
bool g_attempted = false;  // the first task's post-fork ran
bool g_failed = false;     // a declared step could not be leased: no task may run
std::string g_failure;     // why

// The step's verdict, shared with the forked tasks (MAP_SHARED, mapped before
// they exist). Written by slurmstepd in post-fork; read by each task after
// slurmstepd unblocked it, which orders the write before the read.
struct Verdict {
  enum : std::uint32_t { kUndecided = 0, kProceed = 1, kRefused = 2 };
  std::uint32_t state;
  char reason[3072];
};
Verdict* g_verdict = nullptr;
std::string g_lease;                  // the lease id once attached
std::uint32_t g_job = 0, g_step = 0;  // its Slurm ids
std::string g_jobLease, g_jobNode;    // the step's job lease, and this node's name
std::uint32_t g_tasksExited = 0;      // this node's tasks of the step that have exited
std::vector<int> g_taskStatuses;      // ... and their wait statuses
bool g_exitTold = false;              // the daemon answered the tasks' exit report
std::string g_configError;            // plugstack.conf's arguments did not parse

int optGpuMax(int, const char* arg, int) { return (g_options.gpuMemoryMax = arg ? arg : ""), 0; }
int optGpuHigh(int, const char* arg, int) { return (g_options.gpuMemoryHigh = arg ? arg : ""), 0; }
int optPool(int, const char* arg, int) { return (g_options.pool = arg ? arg : ""), 0; }
int optAttr(int, const char* arg, int) { return g_options.attrs.emplace_back(arg ? arg : ""), 0; }

struct spank_option g_table[] = {
    {const_cast<char*>("gpu-memory-max"), const_cast<char*>("SIZE"),
     const_cast<char*>("tally: cap the step's GPU memory (GTT + VRAM) at SIZE, below the job's "
                       "tallymem GRES (default: the GRES on the node)"),
     1, 0, optGpuMax},
    {const_cast<char*>("gpu-memory-high"), const_cast<char*>("SIZE"),
     const_cast<char*>("tally: report (never kill) when the step's GPU memory is over SIZE"), 1, 0,
     optGpuHigh},
    {const_cast<char*>("tally-pool"), const_cast<char*>("NAME"),
     const_cast<char*>("tally: the pool the job's lease joins, set by the step that makes it "
                       "(the plugin's pool= or one of its allowed_pools=)"),
     1, 0, optPool},
    {const_cast<char*>("tally-attr"), const_cast<char*>("KEY=VALUE"),
     const_cast<char*>("tally: a label on the step's lease (repeatable)"), 1, 0, optAttr},
};

std::string joinAttrs(const std::vector<std::string>& attrs) {
  std::string s;
  for (const auto& a : attrs) {
    if (!s.empty()) s += kAttrSep;
    s += a;
  }
  return s;
}

std::vector<std::string> splitAttrs(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= s.size()) {
    auto cut = s.find(kAttrSep, start);
    out.push_back(s.substr(start, cut == std::string::npos ? std::string::npos : cut - start));
    if (cut == std::string::npos) break;
    start = cut + 1;
  }
  return out;
}

std::string getenvOf(spank_t sp, const char* name) {
  std::vector<char> buf(4096);
  if (spank_getenv(sp, name, buf.data(), static_cast<int>(buf.size())) != ESPANK_SUCCESS) return "";
  return std::string(buf.data());
}

// Where this node is in the job's node list: by its name, else by its index
// there. The step's environment SPANK sees has no SLURMD_NODENAME (the tasks
// get it, later; found with two slurmd in the VM), so the name is the step's
// own node list (SLURM_STEP_NODELIST) at S_JOB_NODEID, which counts from the
// step's nodes. The extern step has no such list, but it runs on all of the
// job's nodes, so its S_JOB_NODEID is the node's index in the job's list; the
// batch script runs on the job's first node.
struct NodeRef {
  std::string name;
  int jobIndex = -1;
};
std::string nthHost(const std::string& list, std::uint32_t n) {
  std::string host;
  auto hl = slurm_hostlist_create(list.c_str());
  if (!hl) return host;
  for (std::uint32_t i = 0; i <= n; ++i) {
    char* h = slurm_hostlist_shift(hl);
    if (!h) break;
    if (i == n) host = h;
    std::free(h);
  }
  slurm_hostlist_destroy(hl);
  return host;
}
NodeRef nodeRef(spank_t sp, std::uint32_t step) {
  NodeRef ref{getenvOf(sp, "SLURMD_NODENAME"), -1};
  std::uint32_t id = 0;
  if (!ref.name.empty() || spank_get_item(sp, S_JOB_NODEID, &id) != ESPANK_SUCCESS) return ref;
  if (step == slurm::kExternStep) {
    ref.jobIndex = static_cast<int>(id);
  } else if (step == slurm::kBatchStep) {
    ref.jobIndex = 0;  // the batch script runs on the job's first node (its BatchHost)
  } else if (getenvOf(sp, "SLURM_HET_SIZE").empty()) {
    // (A het job's step lists all its components' nodes there, while its
    // S_JOB_NODEID counts from its own component's: hetComponentNode.)
    if (std::string list = getenvOf(sp, "SLURM_STEP_NODELIST"); !list.empty())
      ref.name = nthHost(list, id);
  }
  return ref;
}

// A heterogeneous job's component: the node at S_JOB_NODEID in the
// component's own node list (SLURM_JOB_NODELIST_HET_GROUP_<offset>, spelt
// _PACK_GROUP_ in 22.05), its offset from the job's record.
std::string hetComponentNode(spank_t sp, std::uint32_t offset) {
  std::uint32_t id = 0;
  if (spank_get_item(sp, S_JOB_NODEID, &id) != ESPANK_SUCCESS) return "";
  for (const char* spelling : {"SLURM_JOB_NODELIST_HET_GROUP_", "SLURM_JOB_NODELIST_PACK_GROUP_"})
    if (std::string list = getenvOf(sp, (spelling + std::to_string(offset)).c_str()); !list.empty())
      return nthHost(list, id);
  return "";
}

// Where a step's plugin time goes, one Slurm debug line per phase as it
// ends ("tally: timing PHASE N us", shown at SlurmdDebug=debug), from
// whichever thread ran it: vm/bench-slurm-phases.sh reads them, so the
// figures in docs/PERFORMANCE.md come from the plugin itself.
class PhaseTimer {
 public:
  explicit PhaseTimer(const char* phase)
      : phase_(phase), start_(std::chrono::steady_clock::now()) {}
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;
  ~PhaseTimer() {
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                  std::chrono::steady_clock::now() - start_)
                  .count();
    slurm_debug("tally: timing %s %lld us", phase_, static_cast<long long>(us));
  }

 private:
  const char* phase_;
  std::chrono::steady_clock::time_point start_;
};

// How long the daemon may take to answer one call (plugstack.conf timeout=).
int daemonTimeoutMs() {
  return static_cast<int>(std::min<std::uint64_t>(g_args.timeoutUs / 1000, 1u << 30));
}

// The two controller calls, as each Slurm release spells them: 25.11 names a
// step by slurm_step_id_t in slurm_get_job_steps, 26.05 in slurm_load_job
// too (its C header picks either form with _Generic, which C++ lacks).
// slurm_get_errno() is gone since 24.11: Slurm's API sets errno.
int loadStep(std::uint32_t job, std::uint32_t step, job_step_info_response_msg_t** steps) {
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 11, 0)
  slurm_step_id_t id{};
  id.job_id = job;
  id.step_het_comp = NO_VAL;
  id.step_id = step;
  return slurm_get_job_steps(&id, steps, SHOW_ALL);
#else
  return slurm_get_job_steps(0, job, step, steps, SHOW_ALL);
#endif
}

int loadJob(std::uint32_t job, job_info_msg_t** jobs, std::uint16_t show) {
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(26, 5, 0)
  slurm_step_id_t id{};
  id.job_id = job;
  id.step_het_comp = NO_VAL;
  id.step_id = NO_VAL;
  return slurm_load_job(jobs, id, show);
#else
  return slurm_load_job(jobs, job, show);
#endif
}

// slurmctld's record of `job` (slurm_load_job), handed to `use` while it is
// held; an error (errno's) when slurmctld cannot be asked. `show`: SHOW_DETAIL
// for the per-node GRES (gres_detail_str); 0 packs the rest, comments
// included, for less of slurmctld's work.
template <typename Use>
tally::Status withJob(std::uint32_t job, std::uint16_t show, Use&& use) {
  job_info_msg_t* jobs = nullptr;
  if (loadJob(job, &jobs, show) != SLURM_SUCCESS || !jobs) {
    int err = errno;
    return tally::Error{err, slurm_strerror(err)};
  }
  for (std::uint32_t i = 0; i < jobs->record_count; ++i)
    if (jobs->job_array[i].job_id == job) use(jobs->job_array[i]);
  slurm_free_job_info_msg(jobs);
  return tally::Ok{};
}

// The job's AdminComment as slurmctld holds it ("" when it has none) and the
// node its batch script runs on; an error when slurmctld cannot be asked.
struct JobComment {
  std::string comment, batchHost;
};
tally::Result<JobComment> adminCommentOf(std::uint32_t job) {
  JobComment found;
  PhaseTimer timer("comment-load");
  auto loaded = withJob(job, 0, [&](const slurm_job_info_t& j) {
    if (j.admin_comment) found.comment = j.admin_comment;
    if (j.batch_host) found.batchHost = j.batch_host;
  });
  if (!loaded) return loaded.error();
  return found;
}

tally::Status setAdminComment(std::uint32_t job, const std::string& comment) {
  job_desc_msg_t update;
  slurm_init_job_desc_msg(&update);
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(26, 5, 0)
  update.step_id.job_id = job;
#else
  update.job_id = job;
#endif
  std::string text = comment;  // the API takes char*; it does not keep it
  update.admin_comment = text.data();
  PhaseTimer timer("comment-update");
  if (slurm_update_job(&update) != SLURM_SUCCESS) {
    int err = errno;
    return tally::Error{err, slurm_strerror(err)};
  }
  return tally::Ok{};
}

// The job's allocation on this node is gres_detail_str at the node's index in
// the job's node list, found by the node's name (nodeRef); else the job's
// per-node request. The GPU memory GRES is the first of `names` it holds. The record
// also says whether the job is a heterogeneous job's component (no SPANK
// item does). An error when slurmctld cannot be asked.
tally::Result<slurm::JobRecord> jobFromSlurmctld(std::uint32_t job, const NodeRef& node,
                                                 const std::vector<std::string>& names) {
  slurm::JobRecord record{job, names, std::nullopt, std::nullopt, ""};
  tally::Status parsed = tally::Ok{};
  PhaseTimer timer("job-record");
  auto loaded = withJob(job, SHOW_DETAIL, [&](const slurm_job_info_t& j) {
    if (!parsed) return;
    if (j.het_job_id != 0 && j.het_job_id != NO_VAL && j.het_job_offset != NO_VAL)
      record.het = slurm::HetJob{j.het_job_id, j.het_job_offset};
    int index = node.jobIndex;
    if (j.nodes && !node.name.empty()) {
      auto hl = slurm_hostlist_create(j.nodes);
      if (hl) {
        index = slurm_hostlist_find(hl, node.name.c_str());
        slurm_hostlist_destroy(hl);
      }
    }
    tally::Result<std::optional<slurm::GresFound>> gres = std::optional<slurm::GresFound>{};
    if (index >= 0 && static_cast<std::uint32_t>(index) < j.gres_detail_cnt && j.gres_detail_str &&
        j.gres_detail_str[index])
      gres = slurm::firstGres(j.gres_detail_str[index], names);
    if (gres && !*gres && j.tres_per_node) gres = slurm::firstGres(j.tres_per_node, names);
    if (gres)
      record.gres = *gres;
    else
      parsed = gres.error();
  });
  if (!loaded)
    return tally::Error{
        loaded.error().code,
        fmt::format("slurmctld did not answer for job {}'s GRES: {}", job, loaded.error().message)};
  if (!parsed) return parsed.error();
  return record;
}

// The step's own GRES request per node, when it made one (a step may ask for
// less than its job holds); none when slurmctld does not say (the job's count
// then bounds the step).
tally::Result<std::optional<slurm::GresFound>> stepGresFromSlurmctld(
    std::uint32_t job, std::uint32_t step, const std::vector<std::string>& names) {
  std::optional<slurm::GresFound> own;
  job_step_info_response_msg_t* steps = nullptr;
  {
    PhaseTimer timer("step-request");
    if (loadStep(job, step, &steps) != SLURM_SUCCESS || !steps) return own;
  }
  tally::Status bad = tally::Ok{};
  for (std::uint32_t i = 0; i < steps->job_step_count && bad; ++i) {
    const auto& s = steps->job_steps[i];
    if (s.step_id.step_id != step || !s.tres_per_node) continue;
    auto found = slurm::firstGres(s.tres_per_node, names);
    if (!found)
      bad = found.error();
    else
      own = *found;
  }
  slurm_free_job_step_info_response_msg(steps);
  if (!bad) return bad.error();
  return own;
}

// What a step needs of slurmctld: its job's record here (its GRES: as an
// earlier step of the job here, or its extern step, kept it, else from
// slurmctld) and, when the job holds the GRES, the step's own request.
struct ControllerFacts {
  tally::Result<slurm::JobRecord> record = tally::Error{0, "not asked"};
  bool fromSlurmctld = false;  // not kept yet: keepRecord keeps it for the job's other steps
  std::optional<tally::Result<std::optional<slurm::GresFound>>> own;  // asked with a GRES
  // The job's lease, attached or joined beside slurmstepd's setup
  // (joinJobEarly) for the job's cgroup `cgroup`; absent when not asked there.
  struct EarlyJobLease {
    std::string cgroup;
    tally::Result<std::string> lease;
  };
  std::optional<EarlyJobLease> early;
};

// Only the job's first step here waits on the controller for the job: a
// job's allocation on a node does not change while it runs. No file is
// written here (askController runs in the prefetch thread): keepRecord does.
// `beside`, when given, runs once the job's record is known, while the
// step's own request is asked in a thread of its own (the prefetch's job
// lease: one call to the daemon and one to slurmctld at once).
ControllerFacts askController(std::uint32_t job, std::uint32_t step, const NodeRef& node,
                              const std::function<void(ControllerFacts&)>& beside = {}) {
  ControllerFacts f;
  if (auto kept = slurm::findJobRecord(g_args.jobCache, job, g_args.gres)) {
    f.record = std::move(*kept);
  } else {
    f.record = jobFromSlurmctld(job, node, g_args.gres);
    f.fromSlurmctld = static_cast<bool>(f.record);
  }
  const bool askOwn =
      step != slurm::kExternStep && f.record && f.record->gres && f.record->gres->count;
  std::future<tally::Result<std::optional<slurm::GresFound>>> own;
  if (askOwn && beside) {
    try {
      own = std::async(std::launch::async, stepGresFromSlurmctld, job, step, g_args.gres);
    } catch (const std::system_error&) {  // no thread: asked after `beside`
    }
  }
  if (beside) beside(f);
  if (askOwn) f.own = own.valid() ? own.get() : stepGresFromSlurmctld(job, step, g_args.gres);
  return f;
}

// The job's record here (job_cache=), written once per step at most, as the
// step's attach ends: what slurmctld gave (the job's first step here) with
// the job's lease once one is granted, for the job's later steps, which then
// ask neither slurmctld nor the daemon for the job. Records of jobs gone from
// beside the job's cgroup go as a new job's is written.
void keepRecord(const ControllerFacts& f, const std::string& jobLease,
                std::string_view procCgroup) {
  if (!f.record || g_args.jobCache.empty()) return;
  if (!f.fromSlurmctld && f.record->jobLease == jobLease) return;  // kept as it is
  slurm::JobRecord record = *f.record;
  record.jobLease = jobLease;
  std::string jobsDir;
  if (auto cg = slurm::jobCgroup(procCgroup);
      f.fromSlurmctld && cg && cg->rfind('/') != std::string::npos)
    jobsDir = std::string(tally::fs::kCgroupRoot) + cg->substr(0, cg->rfind('/'));
  if (auto kept = slurm::keepJobRecord(g_args.jobCache, record, jobsDir); !kept)
    slurm_info("tally: %s; the job's other steps here ask again", kept.error().message.c_str());
}

std::string readText(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  char buf[4096];
  ssize_t n = ::read(fd, buf, sizeof buf);
  ::close(fd);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : "";
}

// A refusal reaches slurmd's log here and the user through the task itself
// (task_init); without the shared page the task is killed before exec.
void refuseTask(pid_t task, const std::string& why) {
  slurm_error("%s", why.c_str());
  if (g_verdict) {
    std::size_t n = std::min(why.size(), sizeof g_verdict->reason - 1);
    std::memcpy(g_verdict->reason, why.data(), n);
    g_verdict->reason[n] = '\0';
    g_verdict->state = Verdict::kRefused;
  } else {
    ::kill(task, SIGKILL);
  }
}

std::string describeBound(const slurm::StepOptions& o,
                          const std::optional<slurm::GresFound>& gres) {
  std::string g = gres && gres->count
                      ? fmt::format("--gres={}:{}", gres->name, units::humanBytes(gres->count))
                      : "";
  if (o.gpuMemoryMax && !g.empty())
    return fmt::format("{} --gpu-memory-max={}", g, *o.gpuMemoryMax);
  if (o.gpuMemoryMax) return fmt::format("--gpu-memory-max={}", *o.gpuMemoryMax);
  if (!g.empty()) return g;
  return "tally options";
}

// Slurm's facts of the step as slurmstepd holds them; the user from the
// job's uid (slurmstepd's own item), not an environment variable a job could
// have set.
slurm::StepFacts factsOf(spank_t sp, std::uint32_t job, std::uint32_t step) {
  slurm::StepFacts facts;
  facts.jobId = job;
  facts.stepId = step;
  uid_t uid = 0;
  if (spank_get_item(sp, S_JOB_UID, &uid) == ESPANK_SUCCESS) {
    struct passwd pw, *found = nullptr;
    char buf[1024];
    facts.user = getpwuid_r(uid, &pw, buf, sizeof buf, &found) == 0 && found
                     ? std::string(pw.pw_name)
                     : std::to_string(uid);
  }
  std::uint32_t arrayJob = 0, arrayTask = 0;
  if (spank_get_item(sp, S_JOB_ARRAY_ID, &arrayJob) == ESPANK_SUCCESS && arrayJob != 0 &&
      spank_get_item(sp, S_JOB_ARRAY_TASK_ID, &arrayTask) == ESPANK_SUCCESS) {
    facts.arrayJobId = arrayJob;
    facts.arrayTaskId = arrayTask;
  }
  facts.account = getenvOf(sp, "SLURM_JOB_ACCOUNT");
  facts.partition = getenvOf(sp, "SLURM_JOB_PARTITION");
  return facts;
}

// One attach call on `client`, timed as `phase` (job-lease, step-lease): the
// lease reply, or why not (and in `refusedCode`, when given, the daemon's
// error code if it answered no).
tally::Result<rpc::api::LeaseReply> lease(rpc::Client& client, const rpc::api::Attach& request,
                                          const std::string& where, const char* phase,
                                          std::string* refusedCode = nullptr) {
  PhaseTimer timer(phase);
  auto reply = client.call(
      request,
      [&](const rpc::Message& ev) {
        auto q = rpc::api::decodeQueued(ev.raw);
        slurm_info("%s: queued as lease %s: %s", where.c_str(), q.lease.c_str(),
                   rpc::api::describe(q).c_str());
      },
      daemonTimeoutMs());
  if (!reply)
    return tally::Error{0, fmt::format("the tally daemon at {} did not lease it ({})",
                                       g_args.socket, reply.error().message)};
  if (!reply->ok) {
    if (refusedCode) *refusedCode = reply->error.code;
    return tally::Error{
        0, fmt::format("the tally daemon refused the lease: {}", rpc::errorSentence(reply->error))};
  }
  auto granted = rpc::api::decodeLeaseReply(reply->result);
  if (!granted)
    return tally::Error{
        0, fmt::format("the tally daemon's grant is malformed ({})", granted.error().message)};
  return std::move(*granted);
}

// One attach-or-join of the job's lease on this node, on a connection of its
// own, for the extern step and for a job's first step (joinJobEarly): the
// granted lease's id, or why not. Absent when no request can be made (the
// job holds no GRES here, or its pool is not allowed).
std::optional<tally::Result<std::string>> attachJobLease(slurm::StepFacts facts,
                                                         const slurm::JobRecord& record,
                                                         const std::string& jobCgroup,
                                                         const slurm::StepOptions& options,
                                                         const std::string& where) {
  facts.gresBytes = record.gres ? record.gres->count : 0;
  facts.het = record.het;
  facts.jobCgroup = jobCgroup;
  auto request = slurm::jobRequest(g_args, options, facts);
  if (!request) return std::nullopt;
  auto client = rpc::Client::connect(g_args.socket);
  if (!client) return client.error();
  auto granted = lease(*client, *request, where, "job-lease");
  if (!granted) return granted.error();
  return granted->lease;
}

// The job's lease on this node, asked in the prefetch thread on the job's
// first step here when no extern step made it (no PrologFlags=Contain): the
// job holds the GRES here and no lease of it is kept. slurmstepd is already
// in the job's cgroup at slurm_spank_init (".../job_J/step_S/slurm"), so the
// cgroup exists and holds a process, and the daemon's attach runs beside the
// step's setup instead of on its first task's path. Absent where it cannot
// be asked here (the post-fork then asks, and says why if it fails); a
// failure here is the step's, said by the post-fork as if it had asked.
std::optional<ControllerFacts::EarlyJobLease> joinJobEarly(const ControllerFacts& f,
                                                           slurm::StepFacts facts,
                                                           std::string_view procCgroup,
                                                           const slurm::StepOptions& options) {
  const auto& record = f.record;
  if (!record || !record->gres || !record->gres->count || !record->jobLease.empty() ||
      !g_configError.empty() || !slurm::checkOptions(options))
    return std::nullopt;
  auto cg = slurm::jobCgroup(procCgroup);
  if (!cg || !cg->ends_with(fmt::format("/job_{}", facts.jobId))) return std::nullopt;
  std::string where = fmt::format("tally: job {}", facts.jobId);
  auto granted = attachJobLease(std::move(facts), *record, *cg, options, where);
  if (!granted) return std::nullopt;
  return ControllerFacts::EarlyJobLease{*cg, std::move(*granted)};
}

// askController for this step (and joinJobEarly), started at
// slurm_spank_init_post_opt (see the file's comment); the first post-fork
// takes it, and slurm_spank_exit joins it if no task was ever forked.
std::future<ControllerFacts> g_prefetch;

void startPrefetch(spank_t sp) {
  std::uint32_t job = 0, step = 0;
  if (g_prefetch.valid() || spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS || step == slurm::kExternStep)
    return;
  // What the thread needs of SPANK's handle is read here: the handle stays in this thread.
  NodeRef node = nodeRef(sp, step);
  slurm::StepFacts facts = factsOf(sp, job, step);
  std::string procCgroup = readText("/proc/self/cgroup");
  try {
    g_prefetch =
        std::async(std::launch::async, [job, step, node, facts, procCgroup, options = g_options] {
          try {
            return askController(job, step, node, [&](ControllerFacts& f) {
              f.early = joinJobEarly(f, facts, procCgroup, options);
            });
          } catch (const std::exception& e) {  // nothing is thrown across into slurmstepd
            ControllerFacts failed;
            failed.record = tally::Error{0, e.what()};
            return failed;
          }
        });
  } catch (const std::system_error& e) {  // no thread: the post-fork asks itself
    slurm_info("tally: step %u.%s: %s; slurmctld is asked at the first task", job,
               slurm::stepName(step).c_str(), e.what());
  }
}

ControllerFacts controllerFacts(std::uint32_t job, std::uint32_t step, const NodeRef& node) {
  if (g_prefetch.valid()) {
    PhaseTimer timer("prefetch-wait");
    return g_prefetch.get();
  }
  return askController(job, step, node);
}

// The job's lease on this node, made by the extern step (PrologFlags=Contain)
// as the job starts here, so the job's GRES is held from its first moment and
// the extern step's processes (pam_slurm_adopt's ssh sessions) are inside it.
// Nothing to refuse here (the extern step has no task of the user's): a
// failure is logged, and each step asks again and is refused if it fails.
// The granted lease's id goes in `jobLease`.
void leaseJob(spank_t sp, std::uint32_t job, std::string_view procCgroup,
              const ControllerFacts& asked, std::string& jobLease) {
  std::string where = fmt::format("tally: job {}", job);
  const auto& record = asked.record;
  if (!record) {
    slurm_error("%s: cannot tell whether it holds GRES %s here: %s; its steps ask again",
                where.c_str(), fmt::format("{}", fmt::join(g_args.gres, ",")).c_str(),
                record.error().message.c_str());
    return;
  }
  if (!record->gres || !record->gres->count || !g_configError.empty()) return;
  auto cg = slurm::jobCgroup(procCgroup);
  if (!cg) {
    slurm_error("%s: %s", where.c_str(), cg.error().message.c_str());
    return;
  }
  auto granted = attachJobLease(factsOf(sp, job, slurm::kExternStep), *record, *cg,
                                slurm::StepOptions{}, where);
  if (!granted) return;
  if (!*granted) {
    slurm_error("%s: %s; its steps ask again", where.c_str(), granted->error().message.c_str());
    return;
  }
  jobLease = **granted;
  slurm_info("%s is tally lease %s on %s (gpu_memory_max %s)", where.c_str(), jobLease.c_str(),
             cg->c_str(), units::humanBytes(record->gres->count).c_str());
}

// The extern step's post-fork: the job's facts asked, its lease made, and
// the job's record kept once with both.
void leaseJobAtExtern(spank_t sp) {
  std::uint32_t job = 0;
  spank_get_item(sp, S_JOB_ID, &job);
  std::string procCgroup = readText("/proc/self/cgroup");
  ControllerFacts asked = askController(job, slurm::kExternStep, nodeRef(sp, slurm::kExternStep));
  std::string jobLease = asked.record ? asked.record->jobLease : "";
  leaseJob(sp, job, procCgroup, asked, jobLease);
  keepRecord(asked, jobLease, procCgroup);
}

// The first task: lease the step (inside its job's lease when the job holds
// the GRES here), or make sure it never runs. The job's lease, when this step
// learns it, goes in `keptLease`.
int leaseStep(spank_t sp, pid_t task, std::uint32_t job, std::uint32_t step, const NodeRef& node,
              std::string_view procCgroup, const ControllerFacts& asked, std::string& keptLease) {
  std::string where = fmt::format("tally: step {}.{}", job, slurm::stepName(step));
  if (std::string all = getenvOf(sp, kAttrsEnv); !all.empty()) g_options.attrs = splitAttrs(all);
  auto fail = [&](const std::string& why) {
    g_failed = true;
    g_failure = why;
    refuseTask(task, why);
    return 0;  // the task refuses itself before exec; see the file's comment for why not -1
  };
  if (auto s = slurm::checkOptions(g_options); !s) return fail(where + ": " + s.error().message);

  const auto& record = asked.record;
  if (!record) {
    // Unknown is not "none": a step that may have asked for GPU memory is not run unbounded.
    return fail(
        fmt::format("{}: cannot tell whether it asked for GRES {}: {}; the step does not "
                    "start",
                    where, fmt::join(g_args.gres, ","), record.error().message));
  }
  const std::optional<slurm::GresFound>& gres = record->gres;
  std::optional<std::uint64_t> gresBytes;
  if (gres) gresBytes = gres->count;
  if (!slurm::declaresAnything(g_options, gresBytes)) return 0;  // nothing declared: untouched
  if (!g_configError.empty()) {
    return fail(
        fmt::format("{}: tally_spank.so is misconfigured in plugstack.conf ({}); the step "
                    "does not start",
                    where, g_configError));
  }

  slurm::StepFacts facts = factsOf(sp, job, step);
  facts.gresBytes = gresBytes;
  facts.het = record->het;
  // The step's own request matters only inside a job's count.
  if (asked.own) {
    const auto& own = *asked.own;
    if (!own)
      return fail(fmt::format("{}: cannot read its own GRES request: {}; the step does not start",
                              where, own.error().message));
    if (*own) facts.stepGresBytes = (*own)->count;
  }
  auto cg = slurm::stepCgroup(procCgroup);
  if (!cg) return fail(fmt::format("{}: {}; the step does not start", where, cg.error().message));
  facts.cgroup = *cg;
  std::string bound = describeBound(g_options, gres);
  // What the step asks is checked before the daemon is (a flag without a
  // GRES is refused for that, whether or not the daemon answers).
  if (auto checked = slurm::stepRequest(g_args, g_options, facts); !checked)
    return fail(fmt::format("{}: {}; the step does not start", where, checked.error().message));

  auto client = rpc::Client::connect(g_args.socket);
  if (!client) {
    return fail(fmt::format("{} declared {}, but {}; the step does not start", where, bound,
                            client.error().message));
  }
  // The job's lease first (the extern step made it, or this step makes or
  // joins it; a step after the job's first here nests in the one its record
  // keeps), then the step's inside it.
  const bool inJob = gresBytes && *gresBytes;
  auto joined = [&](const tally::Result<std::string>& jobLease) -> std::optional<std::string> {
    if (!jobLease)  // why not
      return fmt::format("{} declared {}, but its job's lease: {}; the step does not start", where,
                         bound, jobLease.error().message);
    facts.jobLease = *jobLease;
    keptLease = facts.jobLease;
    return std::nullopt;
  };
  auto joinJob = [&]() -> std::optional<std::string> {
    auto jobReq = slurm::jobRequest(g_args, g_options, facts);
    if (!jobReq)
      return fmt::format("{}: {}; the step does not start", where, jobReq.error().message);
    auto jobLease = lease(*client, *jobReq, where, "job-lease");
    if (!jobLease) return joined(jobLease.error());
    return joined(jobLease->lease);
  };
  if (inJob) {
    auto jobCg = slurm::jobCgroup(procCgroup);
    if (!jobCg)
      return fail(fmt::format("{}: {}; the step does not start", where, jobCg.error().message));
    facts.jobCgroup = *jobCg;
    facts.jobLease = record->jobLease;
    // Asked beside slurmstepd's setup for this cgroup (joinJobEarly), or now.
    const auto& early = asked.early;
    if (facts.jobLease.empty())
      if (auto why = early && early->cgroup == facts.jobCgroup ? joined(early->lease) : joinJob())
        return fail(*why);
  }
  auto request = slurm::stepRequest(g_args, g_options, facts);
  if (!request)
    return fail(fmt::format("{}: {}; the step does not start", where, request.error().message));
  std::string refused;
  auto granted = lease(*client, *request, where, "step-lease", &refused);
  if (!granted && inJob && !record->jobLease.empty() && facts.jobLease == record->jobLease &&
      (refused == rpc::code::kNotFound || refused == rpc::code::kRefused)) {
    // The kept job lease is no parent now (its daemon lost it, or it
    // ended): the job's lease is asked for again, once.
    slurm_info("%s: %s; asking for its job's lease again", where.c_str(),
               granted.error().message.c_str());
    if (auto why = joinJob()) return fail(*why);
    request = slurm::stepRequest(g_args, g_options, facts);
    if (!request)
      return fail(fmt::format("{}: {}; the step does not start", where, request.error().message));
    granted = lease(*client, *request, where, "step-lease");
  }
  if (!granted)
    return fail(fmt::format("{} declared {}, but {}; the step does not start", where, bound,
                            granted.error().message));
  g_lease = granted->lease;
  g_job = job;
  g_step = step;
  g_jobLease = facts.jobLease;
  g_jobNode = node.name;
  if (g_jobNode.empty() && record->het) g_jobNode = hetComponentNode(sp, record->het->offset);
  std::string what =
      request->declared.declaration.gpuMemoryMax
          ? "gpu_memory_max " + units::humanBytes(*request->declared.declaration.gpuMemoryMax)
          : std::string("metered, no GPU bound");
  if (!facts.jobLease.empty()) what += ", in job lease " + facts.jobLease;
  slurm_info("%s is tally lease %s on %s (%s)", where.c_str(), g_lease.c_str(),
             facts.cgroup.c_str(), what.c_str());
  return 0;
}

// The step's first task: its job's facts asked (or taken from the prefetch),
// the step leased, and the job's record kept once with what it learnt.
int attachStep(spank_t sp, pid_t task) {
  PhaseTimer timer("first-task-attach");
  std::uint32_t job = 0, step = 0;
  spank_get_item(sp, S_JOB_ID, &job);
  spank_get_item(sp, S_JOB_STEPID, &step);
  // The GRES is asked for even with --gpu-memory-max: the flag only caps it.
  std::string procCgroup = readText(fmt::format("/proc/{}/cgroup", task));
  NodeRef node = nodeRef(sp, step);
  ControllerFacts asked = controllerFacts(job, step, node);
  std::string jobLease = asked.record ? asked.record->jobLease : "";
  int rc = leaseStep(sp, task, job, step, node, procCgroup, asked, jobLease);
  keepRecord(asked, jobLease, procCgroup);
  return rc;
}

// A lease as the daemon holds it now (its live view; an ended one's rows);
// a daemon from before `live` refuses the field and is asked for the whole view.
tally::Result<rpc::Message> liveLease(rpc::Client& client, const std::string& lease,
                                      const rpc::Client::EventFn& onEvent = {},
                                      int timeoutMs = daemonTimeoutMs()) {
  auto reply = client.call(rpc::api::LeaseQuery{lease, true}, onEvent, timeoutMs);
  if (reply && !reply->ok && reply->error.code == rpc::code::kInvalidParams)
    reply = client.call(rpc::api::LeaseQuery{lease, false}, onEvent, timeoutMs);
  return reply;
}

// The tasks' wait status, for the outcome row: the daemon holds the outcome
// for it (reports_exit), so it is sent even when the cgroup already emptied.
// True once the daemon answered (took it, or said why not); false when the
// call did not reach it, so it is sent again to a restarted daemon.
bool reportExit(rpc::Client& client, int timeoutMs) {
  auto exit = slurm::stepExit(g_lease, g_taskStatuses);
  if (!exit) return true;
  auto reply = client.call(*exit, {}, timeoutMs);
  if (!reply) return false;
  if (!reply->ok)
    slurm_info("tally: lease %s: the daemon did not take the tasks' exit status: %s",
               g_lease.c_str(), reply->error.message.c_str());
  return true;
}

// The step's tasks are gone: wait for the daemon to record the outcome, which
// it reads from the cgroup slurmstepd is about to remove. A daemon restarted
// meanwhile is reconnected to (it re-adopts the lease and waits for the exit
// report, which is sent again if the old daemon never answered it).
void awaitOutcome(const std::string& lease) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(g_args.endWaitUs);
  auto left = [&] {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  deadline - std::chrono::steady_clock::now())
                  .count();
    return static_cast<int>(std::max<long long>(ms, 0));
  };
  bool ended = false;
  std::string lastError;
  // The lease's terminal ledger row (ledger::isTerminal: outcome, lost,
  // withdrawn); a "released" row is a request to end, not the end.
  auto watch = [&](const rpc::Message& ev) {
    if (ev.event != "lease") return;
    auto e = rpc::api::decodeLeaseEvent(ev.raw);
    if (e && e->lease == lease && e->terminal()) ended = true;
  };
  for (bool first = true; !ended && left() > 0; first = false) {
    if (!first) ::usleep(200'000);  // a restarting daemon: its socket comes back
    auto client = rpc::Client::connect(g_args.socket);
    if (!client) {
      lastError = client.error().message;
      continue;
    }
    if (!g_exitTold) g_exitTold = reportExit(*client, left());
    if (auto s = client->call(rpc::api::Subscribe{}, watch, left()); !s || !s->ok) {
      lastError = s ? s->error.message : s.error().message;
      continue;
    }
    // Subscribed first, then asked: an ending between the two is not missed.
    auto now = liveLease(*client, lease, watch, left());
    if (now && now->ok && now->result.value("state", "") == "ended") ended = true;
    if (now && !now->ok) break;  // the daemon no longer knows it: nothing to wait for
    while (!ended && left() > 0) {
      auto ev = client->next(left());
      if (!ev) {
        lastError = ev.error().message;
        break;
      }
      watch(*ev);
    }
  }
  if (!ended) {
    slurm_error(
        "tally: lease %s: no outcome from the daemon at %s within end_wait (%s); it is "
        "recorded when the daemon sees the cgroup empty",
        lease.c_str(), g_args.socket.c_str(),
        lastError.empty() ? "no terminal row yet" : lastError.c_str());
  }
}

// The line this node last wrote for `job`, locked (see summarizeJob); none
// without job_cache= or when it cannot be locked (the line is then written).
std::optional<slurm::SaidLine> lockSaid(std::uint32_t job) {
  if (g_args.jobCache.empty()) return std::nullopt;
  auto locked = slurm::lockSaidLine(g_args.jobCache, job);
  if (locked) return std::move(*locked);
  slurm_info("tally: job %u's AdminComment: %s; written without it", job,
             locked.error().message.c_str());
  return std::nullopt;
}

// A leased step's last task here has exited: this node's line in the job's
// AdminComment, from the job's lease as it stands (its peak so far), so `sacct
// -o AdminComment` (and `scontrol show job` while slurmctld keeps the job) says
// how much GPU memory the job used here as of its last step. Here, before
// slurmstepd tells srun the tasks are gone: after that srun may end the job,
// and slurmctld refuses updates to a finished job ("Job has already
// finished"), as it does at the extern step's end. Two controller calls as a
// step ends, never as one starts, and none when this node's line is what a
// step here last wrote (job_cache=: the job's steps here decide in turn, under
// one lock); each node replaces only its own line. Best effort: the ledger
// keeps the full record. `step` is the daemon's answer about the step's
// lease, which carries its job's lease as parent_view; a daemon that sends
// none is asked for it.
void summarizeJob(rpc::Client& client, std::uint32_t job, std::string node,
                  const tally::Result<rpc::Message>& step, std::optional<slurm::SaidLine>& said) {
  std::string where = fmt::format("tally: job {}'s AdminComment", job);
  tally::Result<rpc::Message> reply = tally::Error{0, "not asked"};
  if (step && step->ok && step->result.value("parent", "") == g_jobLease &&
      step->result.contains("parent_view")) {
    rpc::Message parent = *step;
    parent.result = step->result["parent_view"];
    reply = std::move(parent);
  } else {
    reply = liveLease(client, g_jobLease);
  }
  if (!reply || !reply->ok) {
    slurm_error("%s: the daemon did not say what job lease %s used (%s)", where.c_str(),
                g_jobLease.c_str(),
                reply ? reply->error.message.c_str() : reply.error().message.c_str());
    return;
  }
  auto bound = slurm::stepBoundFromLease(reply->result);
  if (!bound) {
    slurm_error("%s: the daemon's view of lease %s is malformed (%s)", where.c_str(),
                g_jobLease.c_str(), bound.error().message.c_str());
    return;
  }
  // Nothing new from here: no controller call. (The batch script's line
  // names the job's BatchHost, which only slurmctld says: asked first.)
  auto unchanged = [&] { return said && said->last() == slurm::jobSummary(node, *bound); };
  if (!node.empty() && unchanged()) return;
  auto existing = adminCommentOf(job);
  if (!existing) {
    slurm_error("%s: slurmctld did not answer (%s); not written", where.c_str(),
                existing.error().message.c_str());
    return;
  }
  // The batch script's environment names no node: it runs on the job's BatchHost.
  if (node.empty() && g_step == slurm::kBatchStep) node = existing->batchHost;
  if (node.empty()) {
    slurm_error(
        "%s: the step's environment names no node (SLURMD_NODENAME, SLURM_STEP_NODELIST); not "
        "written",
        where.c_str());
    return;
  }
  if (unchanged()) return;
  std::string line = slurm::jobSummary(node, *bound);
  if (auto s = setAdminComment(job, slurm::mergeAdminComment(existing->comment, node, line)); !s) {
    if (s.error().code == ESLURM_JOB_FINISHED)
      slurm_info("%s: the job had already finished; the ledger has its job lease %s", where.c_str(),
                 g_jobLease.c_str());
    else
      slurm_error("%s: slurmctld refused the update (%s)", where.c_str(),
                  s.error().message.c_str());
    return;
  }
  if (said)
    if (auto kept = said->remember(line); !kept)
      slurm_info("%s: %s", where.c_str(), kept.error().message.c_str());
  slurm_info("%s: %s", where.c_str(), line.c_str());
}

// The step's last task has exited: say on the step's stderr what its GPU
// bound did, as Slurm says "Detected 1 oom_kill event" there. Here, not at
// slurm_spank_exit: by then slurmstepd has closed the step's output. The
// daemon's answer (`reply`, about the step's lease) is current: a kill's row
// is written as it kills, and the query drains the kernel's refusals first.
void sayWhatTheBoundDid(const tally::Result<rpc::Message>& reply) {
  if (!reply || !reply->ok) return;
  auto bound = slurm::stepBoundFromLease(reply->result);
  if (!bound) {
    slurm_error("tally: lease %s: the daemon's view of it is malformed (%s)", g_lease.c_str(),
                bound.error().message.c_str());
    return;
  }
  for (const auto& line : slurm::boundLines(g_job, g_step, *bound)) slurm_error("%s", line.c_str());
}

}  // namespace

extern "C" {

TALLY_EXPORT int slurm_spank_init(spank_t sp, int ac, char** av) {
  std::vector<std::string> args(av, av + ac);
  auto parsed = slurm::parsePluginArgs(args);
  if (!parsed) {
    // Remembered, not only returned: an `optional` plugin's failure is ignored,
    // and a step that declares a bound must still not run unbounded.
    g_configError = parsed.error().message;
    slurm_error("tally: %s", g_configError.c_str());
  } else {
    g_args = *parsed;
  }
  spank_context_t ctx = spank_context();
  // Said once per node, by slurmd, not on every step.
  if (ctx == S_CTX_SLURMD) {
    for (const auto& w : slurm::gresNameWarnings(g_args.gres)) slurm_error("tally: %s", w.c_str());
    if (g_args.batchPoolIgnored)
      slurm_info(
          "tally: batch_pool= in plugstack.conf is ignored: the batch script's step is a child "
          "of its job's lease like every step, and the job's GRES counts once in pool=");
    if (g_args.queueTimeoutUs)
      slurm_info(
          "tally: queue_timeout= in plugstack.conf is ignored: a step is granted at once "
          "or refused, never queued behind tally (Slurm has placed it)");
  }
  if (ctx == S_CTX_REMOTE && !g_verdict) {
    // Before slurmstepd forks the tasks: they inherit the mapping, shared.
    void* page =
        ::mmap(nullptr, sizeof(Verdict), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (page != MAP_FAILED) g_verdict = static_cast<Verdict*>(page);  // zeroed: undecided
  }
  if (ctx == S_CTX_LOCAL || ctx == S_CTX_ALLOCATOR || ctx == S_CTX_REMOTE) {
    for (auto& opt : g_table) {
      if (spank_option_register(sp, &opt) != ESPANK_SUCCESS) {
        slurm_error("tally: could not register --%s", opt.name);
        return -1;
      }
    }
  }
  return g_configError.empty() ? 0 : -1;
}

TALLY_EXPORT int slurm_spank_init_post_opt(spank_t sp, int, char**) {
  spank_context_t ctx = spank_context();
  // slurmstepd: at the same point as slurm_spank_init, once the step's
  // options are known (the job's lease may be asked with them).
  if (ctx == S_CTX_REMOTE && g_configError.empty() && g_args.enforce) startPrefetch(sp);
  if (ctx != S_CTX_LOCAL && ctx != S_CTX_ALLOCATOR) return 0;
  // A typo is refused before anything is allocated.
  if (auto s = slurm::checkOptions(g_options); !s) {
    slurm_error("tally: %s", s.error().message.c_str());
    return -1;
  }
  // srun and sbatch hand their environment to the step (Slurm's default
  // --export=ALL); SPANK's own forwarding keeps only an option's last value.
  if (g_options.attrs.size() > 1 &&
      ::setenv(kAttrsEnv, joinAttrs(g_options.attrs).c_str(), 1) != 0) {
    slurm_error("tally: could not pass --tally-attr to the step: %s", std::strerror(errno));
    return -1;
  }
  return 0;
}

TALLY_EXPORT int slurm_spank_task_post_fork(spank_t sp, int, char**) {
  if (!spank_remote(sp) || !g_args.enforce) return 0;
  std::uint32_t step = 0;
  if (spank_get_item(sp, S_JOB_STEPID, &step) == ESPANK_SUCCESS && step == slurm::kExternStep) {
    // slurmstepd calls this once for the extern step, with no task, after
    // forking its sleep (taskid -1).
    if (g_attempted) return 0;
    g_attempted = true;
    try {
      leaseJobAtExtern(sp);
    } catch (const std::exception& e) {
      slurm_error("tally: job lease at the extern step: %s", e.what());
    }
    return 0;
  }
  pid_t task = 0;
  if (spank_get_item(sp, S_TASK_PID, &task) != ESPANK_SUCCESS || task <= 0) return 0;
  if (g_failed) {
    refuseTask(task, g_failure);  // every task of a refused step
    return 0;
  }
  if (g_attempted) return 0;
  g_attempted = true;
  try {
    attachStep(sp, task);
  } catch (const std::exception& e) {  // nothing is thrown across into slurmstepd
    g_failed = true;
    g_failure = fmt::format("tally: {}; the step does not start", e.what());
    refuseTask(task, g_failure);
  }
  if (!g_failed && g_verdict) g_verdict->state = Verdict::kProceed;
  return 0;
}

// In each task, as the user, after slurmstepd unblocked it and just before its
// execve: a refused step's task says why and exits without running anything.
TALLY_EXPORT int slurm_spank_task_init(spank_t sp, int, char**) {
  if (!spank_remote(sp) || !g_verdict || g_verdict->state != Verdict::kRefused) return 0;
  std::string line = std::string(g_verdict->reason) + "\n";
  [[maybe_unused]] auto n = ::write(STDERR_FILENO, line.data(), line.size());
  ::_exit(1);  // not a return: Slurm ignores an `optional` plugin's -1 here
}

TALLY_EXPORT int slurm_spank_task_exit(spank_t sp, int, char**) {
  if (!spank_remote(sp) || g_lease.empty()) return 0;
  std::uint32_t local = 0;
  if (spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &local) != ESPANK_SUCCESS) return 0;
  int status = 0;
  if (spank_get_item(sp, S_TASK_EXIT_STATUS, &status) == ESPANK_SUCCESS)
    g_taskStatuses.push_back(status);
  if (++g_tasksExited != local) return 0;
  try {
    // Here only what must come before srun hears the tasks ended: the
    // step's stderr line and the job's AdminComment. The tasks' wait status
    // goes with the end wait (slurm_spank_exit, after srun was told): the
    // daemon holds the outcome for it (kExitReportWaitUs).
    if (auto client = rpc::Client::connect(g_args.socket)) {
      // One question for the step and its job, asked under the job's lock:
      // steps ending here at once write the job's line in the order their
      // figures were read, so a later step's line is never older.
      std::optional<slurm::SaidLine> said = g_jobLease.empty() ? std::nullopt : lockSaid(g_job);
      auto reply = [&] {
        PhaseTimer timer("end-query");
        return liveLease(*client, g_lease);
      }();
      sayWhatTheBoundDid(reply);
      if (!g_jobLease.empty()) summarizeJob(*client, g_job, g_jobNode, reply, said);
    }
  } catch (const std::exception& e) {
    slurm_error("tally: lease %s: %s", g_lease.c_str(), e.what());
  }
  return 0;
}

TALLY_EXPORT int slurm_spank_exit(spank_t sp, int, char**) {
  if (!spank_remote(sp)) return 0;
  if (g_prefetch.valid()) g_prefetch.wait();  // no task was forked: no thread outlives the plugin
  std::uint32_t step = 0, job = 0;
  if (g_args.enforce && spank_get_item(sp, S_JOB_STEPID, &step) == ESPANK_SUCCESS &&
      step == slurm::kExternStep) {
    // The job ends on this node: its kept GRES goes with it.
    if (spank_get_item(sp, S_JOB_ID, &job) == ESPANK_SUCCESS) {
      slurm::forgetJobRecord(g_args.jobCache, job);
    }
    return 0;
  }
  if (g_lease.empty()) return 0;
  try {
    awaitOutcome(g_lease);
  } catch (const std::exception& e) {
    slurm_error("tally: lease %s: %s", g_lease.c_str(), e.what());
  }
  return 0;
}

}  // extern "C"
