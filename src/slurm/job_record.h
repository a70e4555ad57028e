// What a node learnt of a job's GPU memory GRES here, kept for the job's other
// steps so that only its first step (or its extern step) asks slurmctld: a job's
// GRES on a node cannot change while it runs. The plugin keeps one small file per
// job in a root-only directory (slurm/spank_job_facts.cpp); this is that file's
// text, encoded and decoded without I/O (fuzzed: fuzz_slurm_gres).
//
//   tally-slurm-job 2 job=4242 cgroup=8812 asked=tallymem gres=tallymem:67108864
//   tally-slurm-job 2 job=4243 cgroup=8840 asked=tallymem,gpumem gres=none
//   tally-slurm-job 2 job=4245 cgroup=9001 asked=tallymem gres=none het=4244+1
//   tally-slurm-job 2 job=4246 cgroup=9120 asked=tallymem gres=tallymem:67108864
//     account=physics partition=gpu lease=ed6397fc3ad5
//
// `cgroup` is the kernel's id (the inode) of the job's cgroup on this node when
// slurmctld was asked: a record is one run of the job here. A requeued job runs
// in a new job_J cgroup (its old run's went with its steps), so its steps never
// take the old run's GRES, even if the user raised it while it was pending.
// (Slurm's own restart count cannot key it: S_SLURM_RESTART_COUNT reads
// slurmstepd's job->restart_cnt, which slurmd never sets, 22.05 to 26.05; and
// SLURM_RESTART_COUNT and SLURM_JOB_START_TIME are the user's environment at
// post-fork.) `asked` is the plugin's GRES names (gres=) the answer is about:
// "none" means none of those, so a record asked with other names is not an
// answer. `account` and `partition` are slurmctld's, never the user's
// environment. `lease` is the job's lease on this node once one is granted:
// the job's later steps nest in it without asking the daemon for it again (the
// daemon checks a child's parent, and a stale id sends the step back to
// attach-or-join).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "slurm/gres.h"
#include "util/result.h"

namespace tally::slurm {

// A heterogeneous job's component: its leader's job id and its offset (the
// job record's het_job_id, het_job_offset; no SPANK item carries them).
struct HetJob {
  std::uint32_t leader = 0, offset = 0;
};

struct JobRecord {
  std::uint32_t job = 0;
  std::uint64_t cgroupId = 0;      // the job's cgroup here when asked (its inode); never 0 kept
  std::vector<std::string> asked;  // the GRES names slurmctld was asked about, in order
  std::optional<GresFound> gres;   // none: the job holds none of `asked` here
  std::optional<HetJob> het;       // absent: not part of a heterogeneous job
  std::string account, partition;  // slurmctld's; "": unknown (or not a record word)
  std::string jobLease;            // "": no job lease granted here yet
  // slurmctld said the job holds some GRES on this node, of any name. Not in
  // the record's file: it is asked only while plugstack.conf's GRES names are
  // uncertain (PluginArgs::gresUncertain), when no record is kept or used.
  bool anyGres = false;
};

// An account or partition name as a record keeps it: 1-64 printable ASCII
// bytes, no space. slurmctld's names are; anything else is not kept.
bool validRecordWord(std::string_view word);

// A GRES name as plugstack.conf's gres= may give one and a record keeps it:
// 1-64 printable bytes, none of ":;=/(), " (Slurm's GRES syntax and the
// record's own, whose asked= is a comma list).
bool validGresName(std::string_view name);

std::string encodeJobRecord(const JobRecord& r);
// One line as encodeJobRecord writes it; anything else (another version, a
// field missing or malformed, trailing bytes) is an error: the plugin then
// asks slurmctld, never guesses.
Result<JobRecord> decodeJobRecord(std::string_view text);

// The file's name in the directory: "job_4242".
std::string jobRecordName(std::uint32_t job);
// The job id a directory entry is the record of; absent for any other name.
std::optional<std::uint32_t> jobOfRecordName(std::string_view name);

}  // namespace tally::slurm
