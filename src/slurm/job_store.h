// Where the Slurm plugin keeps each job's GRES on this node for the job's other
// steps (slurm/job_record.h): one file per job in a directory only the plugin's
// user (root, in slurmstepd) may write, since a record decides whether a step is
// leased and a user must not plant one. Files go when the job's extern step ends
// (PrologFlags=Contain) or, at the latest, when a later job's record is kept and
// the job's cgroup is gone. A record that cannot be read is no record: the step
// asks slurmctld.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "slurm/job_record.h"
#include "util/result.h"

namespace tally::slurm {

// The record of `job` in `dir`, when there is one, whole, of this run of the
// job here (kept for the job cgroup whose id is `jobCgroupId`: a requeued job
// has a new one), asked about `names`, in a directory and a file owned by this
// process's user that no one else may write. Absent otherwise (the caller asks
// slurmctld), and always when `jobCgroupId` is 0 (unknown).
std::optional<JobRecord> findJobRecord(const std::string& dir, std::uint32_t job,
                                       std::uint64_t jobCgroupId,
                                       const std::vector<std::string>& names);

// The kernel's id of a cgroup (its directory's inode on cgroup2), 0 when it
// cannot be read: what keys a job's record to one run of the job here.
std::uint64_t cgroupIdOf(const std::string& path);

// Keeps `r` in `dir` (made 0700 as needed; written aside and renamed, so a
// reader sees a whole record or none), then removes the records of jobs with
// no cgroup left in `jobsCgroupDir` (the directory holding the job_J cgroups;
// empty: none removed). An error says why nothing was kept.
Status keepJobRecord(const std::string& dir, const JobRecord& r, const std::string& jobsCgroupDir);

// Removes the record of `job`, and its said line, if any (the job's extern step ends).
void forgetJobRecord(const std::string& dir, std::uint32_t job);

// This node's line in a job's AdminComment as a step here last wrote it
// ("job_J.said" beside the job's record), held under an exclusive lock
// (flock) from lockSaidLine until destroyed: steps of the job ending here at
// once decide and write in turn, so the file names what slurmctld was last
// told from here, and a step whose line is the same writes nothing. A file
// someone else could have written counts as never written.
class SaidLine {
 public:
  SaidLine(SaidLine&& o) noexcept : fd_(o.fd_), last_(std::move(o.last_)) { o.fd_ = -1; }
  SaidLine& operator=(SaidLine&&) = delete;
  SaidLine(const SaidLine&) = delete;
  ~SaidLine();

  const std::string& last() const { return last_; }  // "": none written yet
  // After slurmctld took `line`.
  Status remember(const std::string& line);

 private:
  friend Result<SaidLine> lockSaidLine(const std::string& dir, std::uint32_t job);
  SaidLine(int fd, std::string last) : fd_(fd), last_(std::move(last)) {}
  int fd_;
  std::string last_;
};

// Opens (making it) and locks `job`'s said line in `dir`, waiting for a step
// that holds it. An error when `dir` is not the plugin's own or the file
// cannot be opened: the caller writes as if nothing was said.
Result<SaidLine> lockSaidLine(const std::string& dir, std::uint32_t job);

}  // namespace tally::slurm
