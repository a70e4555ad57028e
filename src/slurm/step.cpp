#include "slurm/step.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "lease/attributes.h"
#include "lease/limits_rule.h"
#include "lease/pool_name.h"
#include "lease/spec.h"
#include "probes/proc_cgroup.h"
#include "slurm/job_record.h"
#include "util/text.h"
#include "util/units.h"

namespace tally::slurm {

namespace {

Error optionError(std::string_view option, std::string_view value, const Error& why) {
  return Error{EINVAL,
               fmt::format("--{}={}: {}", option, text::truncateUtf8(value, 64), why.message)};
}

// Our own attributes: the step's Slurm ids, set by the plugin, never by the
// user. Every key starting slurm_ is the plugin's (a user's --tally-attr never
// does), so a reader tells Slurm's facts from the user's words by the prefix.
constexpr std::string_view kSlurmKeys[] = {
    "slurm_job_id",        "slurm_step_id",    "slurm_user",
    "slurm_partition",     "slurm_account",    "slurm_array_job_id",
    "slurm_array_task_id", "slurm_het_job_id", "slurm_het_job_offset"};
// On the job's lease alone (it has no user attributes): the site's policy
// for a job without the GRES.
constexpr const char* kNoGresKey = "slurm_no_gres";
constexpr std::string_view kSlurmPrefix = "slurm_";

constexpr std::string_view kPluginKeys =
    "socket, pool, allowed_pools, gres, timeout, queue_timeout, end_wait, enforce, job_cache, "
    "no_gres, admin_comment";

// "a,b,c" -> {"a", "b", "c"}; an empty item stays (the caller refuses it).
std::vector<std::string_view> commaList(std::string_view value) {
  std::vector<std::string_view> items;
  for (std::size_t at = 0; at <= value.size();) {
    std::size_t comma = std::min(value.find(',', at), value.size());
    items.push_back(value.substr(at, comma - at));
    at = comma + 1;
  }
  return items;
}

}  // namespace

PluginArgs readPluginArgs(const std::vector<std::string>& args,
                          std::vector<std::string>& problems) {
  PluginArgs a;
  for (const auto& arg : args) {
    auto eq = arg.find('=');
    if (eq == std::string::npos) {
      problems.push_back(fmt::format("plugstack.conf argument '{}' is not KEY=VALUE (keys: {})",
                                     text::truncateUtf8(arg, 64), kPluginKeys));
      a.gresUncertain = true;
      continue;
    }
    std::string_view key(arg.data(), eq), value(arg.data() + eq + 1, arg.size() - eq - 1);
    // Said, and the key left at its default: the other keys still apply, and
    // every problem is listed at once.
    auto bad = [&](const std::string& why) {
      problems.push_back(
          fmt::format("plugstack.conf argument {}: {}", text::truncateUtf8(key, 64), why));
    };
    if (key == "socket") {
      if (value.empty() || value[0] != '/') {
        bad("must be an absolute path");
        continue;
      }
      a.socket = std::string(value);
    } else if (key == "pool") {
      if (!lease::validPoolName(value)) {
        bad("must be a pool name, 1-64 of [A-Za-z0-9_-]");
        continue;
      }
      a.pool = std::string(value);
    } else if (key == "batch_pool") {
      a.batchPoolIgnored = true;
    } else if (key == "allowed_pools") {
      std::vector<std::string> names;
      for (std::string_view name : commaList(value))
        if (lease::validPoolName(name)) names.emplace_back(name);
      if (names.size() != commaList(value).size()) {
        bad("must be pool names separated by commas, each 1-64 of [A-Za-z0-9_-]");
        continue;
      }
      a.allowedPools = std::move(names);
    } else if (key == "gres") {
      std::vector<std::string> names;
      for (std::string_view name : commaList(value))
        if (validGresName(name)) names.emplace_back(name);
      if (names.size() != commaList(value).size()) {
        bad("must be GRES names separated by commas, such as tallymem or tallymem,gpumem");
        a.gresUncertain = true;
        continue;
      }
      if (names.empty() || names.size() > 4) {
        bad("must name 1 to 4 GRES");
        a.gresUncertain = true;
        continue;
      }
      a.gres = std::move(names);
    } else if (key == "timeout" || key == "queue_timeout" || key == "end_wait") {
      auto us = units::parseDurationUs(value);
      if (!us) {
        bad(us.error().message);
        continue;
      }
      if (key == "timeout") {
        if (*us == 0) {
          bad("must be more than 0");
          continue;
        }
        a.timeoutUs = *us;
      } else if (key == "end_wait") {
        a.endWaitUs = *us;
      } else {
        a.queueTimeoutUs = *us;
      }
    } else if (key == "job_cache") {
      if (value == "off") {
        a.jobCache.clear();
      } else if (value.empty() || value[0] != '/' || value == "/") {
        bad("must be an absolute directory path (root-only, made as needed) or off");
      } else {
        a.jobCache = std::string(value);
      }
    } else if (key == "no_gres") {
      if (value == "refuse") {
        a.noGres = {};
      } else if (value == "meter") {
        a.noGres = {NoGresPolicy::Kind::kMeter, 0};
      } else if (auto n = units::parseSize(value); n && *n > 0) {
        a.noGres = {NoGresPolicy::Kind::kCap, *n};
      } else {
        bad("must be refuse (no GPU memory without the GRES), a size such as 256M (at most that), "
            "or meter (metered, no bound)");
      }
    } else if (key == "enforce" || key == "admin_comment") {
      if (value != "on" && value != "off") {
        bad("must be on or off");
        continue;
      }
      (key == "enforce" ? a.enforce : a.adminComment) = value == "on";
    } else {
      bad(fmt::format("unknown (keys: {})", kPluginKeys));
      a.gresUncertain = true;  // a misspelt gres= is unknown too
    }
  }
  return a;
}

Result<PluginArgs> parsePluginArgs(const std::vector<std::string>& args) {
  std::vector<std::string> problems;
  PluginArgs a = readPluginArgs(args, problems);
  if (!problems.empty()) return Error{EINVAL, fmt::format("{}", fmt::join(problems, "; "))};
  return a;
}

// The plugin's own spelling of the limits (srun --gpu-memory-max=...).
constexpr lease::LimitNames kSlurmLimitNames{"--memory-max", "--gpu-memory-max",
                                             "--gpu-memory-high"};

Status checkOptions(const StepOptions& o) {
  for (auto [flag, v] : {std::pair{"gpu-memory-max", &o.gpuMemoryMax},
                         std::pair{"gpu-memory-high", &o.gpuMemoryHigh}}) {
    if (!*v) continue;
    auto n = units::parseSize(**v);
    if (!n) return optionError(flag, **v, n.error());
  }
  lease::DeclaredLimits limits;
  if (o.gpuMemoryMax) limits.gpuMemoryMax = *units::parseSize(*o.gpuMemoryMax);
  if (o.gpuMemoryHigh) limits.gpuMemoryHigh = *units::parseSize(*o.gpuMemoryHigh);
  if (auto s = lease::checkLimits(limits, kSlurmLimitNames); !s) return s;
  if (o.pool && !lease::validPoolName(*o.pool))
    return optionError("tally-pool", *o.pool, Error{EINVAL, "must be 1-64 of [A-Za-z0-9_-]"});
  if (o.attrs.size() + std::size(kSlurmKeys) > lease::kMaxAttributes) {
    return Error{EINVAL,
                 fmt::format("--tally-attr: at most {} (the plugin adds the {} slurm_* ids)",
                             lease::kMaxAttributes - std::size(kSlurmKeys), std::size(kSlurmKeys))};
  }
  for (const auto& a : o.attrs) {
    auto kv = lease::parseAttribute(a);
    if (!kv) return optionError("tally-attr", a, kv.error());
    if (kv->first.starts_with(kSlurmPrefix))
      return optionError("tally-attr", a,
                         Error{EINVAL, "slurm_* keys are the plugin's (Slurm's own ids)"});
  }
  return Ok{};
}

std::vector<std::string> gresNameWarnings(const std::vector<std::string>& names) {
  // Slurm's own GRES/TRES names (slurm.conf(5) GresTypes, AccountingStorageTRES).
  constexpr std::string_view kSlurmOwn[] = {"gpu", "gpumem", "gpuutil", "mps", "shard", "nic"};
  std::vector<std::string> said;
  for (const auto& n : names) {
    if (std::find(std::begin(kSlurmOwn), std::end(kSlurmOwn), n) != std::end(kSlurmOwn)) {
      said.push_back(fmt::format(
          "gres={}: Slurm has its own gres/{} (since 23.02 it adds gres/gpumem and "
          "gres/gpuutil whenever gres/gpu is accounted, filled from gpu/rsmi or gpu/nvml): sacct "
          "would mix tally's bytes with Slurm's readings. Name tally's GRES tallymem "
          "(GresTypes=tallymem, AccountingStorageTRES=gres/tallymem; docs/slurm.md), keeping {} "
          "after it in gres= while jobs still ask for it",
          n, n, n));
    } else if (n.rfind("gpu", 0) == 0) {
      said.push_back(fmt::format(
          "gres={}: names starting with gpu are Slurm's GPU family (its accounting and --gpus "
          "options treat them as GPUs); name tally's GRES tallymem",
          n));
    }
  }
  return said;
}

std::string stepName(std::uint32_t step) {
  if (step == kBatchStep) return "batch";
  if (step == kExternStep) return "extern";
  return std::to_string(step);
}

std::string leaseName(std::uint32_t job, std::uint32_t step) {
  return fmt::format("slurm-{}.{}", job, stepName(step));
}

std::string jobLeaseName(std::uint32_t job) { return fmt::format("slurm-{}", job); }

void takeRecord(StepFacts& f, const JobRecord& r) {
  f.het = r.het;
  f.account = r.account;
  f.partition = r.partition;
}

std::string describe(const NoGresPolicy& p) {
  switch (p.kind) {
    case NoGresPolicy::Kind::kRefuse:
      return "refuse";
    case NoGresPolicy::Kind::kMeter:
      return "meter";
    case NoGresPolicy::Kind::kCap:
      break;
  }
  return units::humanBytes(p.capBytes);
}

std::optional<std::uint64_t> jobBound(const PluginArgs& args, const StepFacts& f) {
  if (f.gresBytes && *f.gresBytes) return *f.gresBytes;
  switch (args.noGres.kind) {
    case NoGresPolicy::Kind::kRefuse:
      return 0;
    case NoGresPolicy::Kind::kCap:
      return args.noGres.capBytes;
    case NoGresPolicy::Kind::kMeter:
      break;
  }
  return std::nullopt;
}

bool declaresAnything(const StepOptions& o, std::optional<std::uint64_t> gresBytes) {
  return o.gpuMemoryMax || o.gpuMemoryHigh || o.pool || !o.attrs.empty() ||
         (gresBytes && *gresBytes > 0);
}

namespace {

// The pool a lease of this job joins: plugstack.conf's, or one the step named
// that plugstack.conf allows.
Result<std::string> poolOf(const PluginArgs& args, const StepOptions& o) {
  if (!o.pool || *o.pool == args.pool) return args.pool;
  if (std::find(args.allowedPools.begin(), args.allowedPools.end(), *o.pool) !=
      args.allowedPools.end())
    return *o.pool;
  std::vector<std::string> allowed{args.pool};
  allowed.insert(allowed.end(), args.allowedPools.begin(), args.allowedPools.end());
  return optionError("tally-pool", *o.pool,
                     Error{EPERM, fmt::format("not a pool steps may join on this node ({}: "
                                              "plugstack.conf's pool= and allowed_pools=)",
                                              fmt::join(allowed, ", "))});
}

// Slurm's facts as attributes: the job's (every lease of it) and the step's.
Status slurmAttributes(const StepFacts& f, bool step, lease::Attributes& a) {
  a["slurm_job_id"] = std::to_string(f.jobId);
  if (step) a["slurm_step_id"] = stepName(f.stepId);
  if (!f.user.empty()) a["slurm_user"] = text::truncateUtf8(f.user, lease::kMaxAttributeValue);
  if (!f.partition.empty())
    a["slurm_partition"] = text::truncateUtf8(f.partition, lease::kMaxAttributeValue);
  if (!f.account.empty())
    a["slurm_account"] = text::truncateUtf8(f.account, lease::kMaxAttributeValue);
  if (f.arrayJobId) a["slurm_array_job_id"] = std::to_string(*f.arrayJobId);
  if (f.arrayTaskId) a["slurm_array_task_id"] = std::to_string(*f.arrayTaskId);
  if (f.het) {
    a["slurm_het_job_id"] = std::to_string(f.het->leader);
    a["slurm_het_job_offset"] = std::to_string(f.het->offset);
  }
  for (const auto& [k, v] : a) {
    if (auto s = lease::checkAttribute(k, v); !s) return s.error();
  }
  return Ok{};
}

}  // namespace

Result<rpc::api::Attach> jobRequest(const PluginArgs& args, const StepOptions& o,
                                    const StepFacts& f) {
  rpc::api::Attach req;
  rpc::api::Declared& d = req.declared;
  auto pool = poolOf(args, o);
  if (!pool) return pool.error();
  d.pools = {*pool};
  d.declaration.name = jobLeaseName(f.jobId);
  d.declaration.gpuMemoryMax = jobBound(args, f);
  // Slurm placed the job (against its GRES, or with none under the site's
  // policy): granted now or refused by the pool's declared budget, never
  // queued and never refused for measured headroom (buffers still being
  // freed, page cache on an APU); the daemon records what headroom lacked,
  // and the kernel charge holds the job to its count.
  d.noWait = true;
  d.placed = true;
  if (auto s = slurmAttributes(f, false, d.declaration.attributes); !s) return s.error();
  // Said on the lease, so `tally ps` and the ledger tell a policy bound from a GRES.
  // A cap in bytes (raw units inside), else the policy's name.
  if (!f.gresBytes || !*f.gresBytes)
    d.declaration.attributes[kNoGresKey] = args.noGres.kind == NoGresPolicy::Kind::kCap
                                               ? std::to_string(args.noGres.capBytes)
                                               : describe(args.noGres);
  req.target.cgroup = f.jobCgroup;
  req.join = true;  // the extern step made it, or an earlier step of the job
  return req;
}

Result<rpc::api::Attach> stepRequest(const PluginArgs& args, const StepOptions& o,
                                     const StepFacts& f) {
  rpc::api::Attach req;
  rpc::api::Declared& d = req.declared;
  auto pool = poolOf(args, o);
  if (!pool) return pool.error();
  const bool child = !f.jobLease.empty();
  if (child)
    req.parent = f.jobLease;  // the job's pools count it; it holds none
  else
    d.pools = {*pool};
  d.declaration.name = leaseName(f.jobId, f.stepId);
  const bool gres = f.gresBytes && *f.gresBytes > 0;
  // The step's own ask: its GRES request, capped by --gpu-memory-max.
  std::optional<std::uint64_t> own = f.stepGresBytes;
  if (o.gpuMemoryMax) {
    auto n = units::parseSize(*o.gpuMemoryMax);
    if (!n) return optionError("gpu-memory-max", *o.gpuMemoryMax, n.error());
    // Slurm placed the job by its GRES; the flag can only ask for less.
    if (!gres) {
      return optionError(
          "gpu-memory-max", *o.gpuMemoryMax,
          Error{EINVAL, fmt::format("the job holds no {} GRES on this node, and Slurm places GPU "
                                    "memory by that GRES: --gpu-memory-max only caps what it "
                                    "gives. Ask for it: --gres={}:{}",
                                    args.gres.front(), args.gres.front(), *o.gpuMemoryMax)});
    }
    own = own ? std::min(*own, *n) : *n;
  }
  // Never above the job's bound (the daemon holds a child to its parent's too).
  if (auto job = jobBound(args, f)) d.declaration.gpuMemoryMax = own ? std::min(*own, *job) : *job;
  if (o.gpuMemoryHigh) {
    auto n = units::parseSize(*o.gpuMemoryHigh);
    if (!n) return optionError("gpu-memory-high", *o.gpuMemoryHigh, n.error());
    d.declaration.gpuMemoryHigh = *n;
  }
  // Slurm has placed the step and slurmstepd waits on this answer: granted
  // now or refused with the daemon's reason, never queued.
  d.noWait = true;
  for (const auto& a : o.attrs) {
    auto kv = lease::parseAttribute(a);
    if (!kv) return optionError("tally-attr", a, kv.error());
    d.declaration.attributes[kv->first] = kv->second;
  }
  if (auto s = slurmAttributes(f, true, d.declaration.attributes); !s) return s.error();
  req.target.cgroup = f.cgroup;
  // slurmstepd reaps the tasks: the plugin reports their wait status (exited).
  req.reportsExit = true;
  return req;
}

namespace {

// A Slurm process's live cgroup v2 path from its /proc/<pid>/cgroup text, or
// what to configure (`who`: "the task", "slurmstepd").
Result<std::string> liveCgroup(std::string_view procCgroupText, const char* who) {
  auto cg = probes::parseProcCgroup(procCgroupText);
  if (!cg) {
    return Error{ENOENT, fmt::format("{} has no cgroup v2 membership (a cgroup v1 host?); tally "
                                     "needs CgroupPlugin=cgroup/v2 in cgroup.conf on a unified "
                                     "hierarchy",
                                     who)};
  }
  if (cg->deleted) return Error{ESRCH, fmt::format("{}'s cgroup {} is deleted", who, cg->path)};
  return std::move(cg->path);
}

}  // namespace

Result<std::string> stepCgroup(std::string_view procCgroupText) {
  auto path = liveCgroup(procCgroupText, "the task");
  if (!path) return path.error();
  std::string_view p = *path;
  auto slash = p.rfind('/');
  std::string_view leaf = slash == std::string_view::npos ? p : p.substr(slash + 1);
  std::string_view parent =
      slash == std::string_view::npos ? std::string_view{} : p.substr(0, slash);
  auto pslash = parent.rfind('/');
  std::string_view parentLeaf =
      pslash == std::string_view::npos ? parent : parent.substr(pslash + 1);
  auto gslash =
      pslash == std::string_view::npos ? std::string_view::npos : parent.rfind('/', pslash - 1);
  std::string_view stepLeaf =
      pslash == std::string_view::npos || pslash == 0
          ? std::string_view{}
          : parent.substr(gslash == std::string_view::npos ? 0 : gslash + 1,
                          pslash - (gslash == std::string_view::npos ? 0 : gslash + 1));
  if (!text::startsWith(leaf, "task_") || parentLeaf != "user" ||
      !text::startsWith(stepLeaf, "step_")) {
    return Error{EINVAL, fmt::format("the task's cgroup {} is not Slurm's cgroup/v2 layout "
                                     "(.../job_J/step_S/user/task_T); set CgroupPlugin=cgroup/v2 "
                                     "and ProctrackType=proctrack/cgroup",
                                     text::truncateUtf8(p, 200))};
  }
  return std::string(parent);
}

bool jobCgroupLeaf(std::string_view leaf) {
  auto digits = [](std::string_view s) {
    return !s.empty() &&
           std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (text::startsWith(leaf, "job_")) return digits(leaf.substr(4));
  // print_sluid() (src/common/sluid.c): "s" and 13 of Crockford's base32.
  constexpr std::string_view kCrockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
  return leaf.size() == 14 && leaf[0] == 's' &&
         std::all_of(leaf.begin() + 1, leaf.end(),
                     [&](char c) { return kCrockford.find(c) != std::string_view::npos; });
}

Result<std::string> jobCgroup(std::string_view procCgroupText) {
  auto path = liveCgroup(procCgroupText, "slurmstepd");
  if (!path) return path.error();
  // The last job cgroup component (jobCgroupLeaf) with a step_ cgroup below it.
  std::string_view p = *path;
  for (std::size_t step = p.rfind("/step_"); step != std::string_view::npos && step > 0;
       step = p.rfind("/step_", step - 1)) {
    std::size_t at = p.rfind('/', step - 1);
    if (at == std::string_view::npos) break;
    if (jobCgroupLeaf(p.substr(at + 1, step - at - 1))) return std::string(p.substr(0, step));
  }
  return Error{EINVAL, fmt::format("the cgroup {} is not in Slurm's cgroup/v2 layout "
                                   "(.../job_J/step_S/..., or the job's SLUID for job_J as 26.05 "
                                   "names it); set CgroupPlugin=cgroup/v2 and "
                                   "ProctrackType=proctrack/cgroup",
                                   text::truncateUtf8(p, 200))};
}

}  // namespace tally::slurm
