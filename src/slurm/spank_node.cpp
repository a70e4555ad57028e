#include "slurm/spank_node.h"

#include <fcntl.h>
#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

namespace tally::slurm::plugin {

std::string getenvOf(spank_t sp, const char* name) {
  std::vector<char> buf(4096);
  if (spank_getenv(sp, name, buf.data(), static_cast<int>(buf.size())) != ESPANK_SUCCESS) return "";
  return std::string(buf.data());
}

NodeRef nodeRef(spank_t sp, std::uint32_t step) {
  // slurmstepd's own environment, never the job's (spank_getenv: what srun
  // sent, so an `srun -N4` inside a batch script would carry the batch
  // host's name to all four nodes): slurmstepd sets it from slurmd's
  // configuration before any plugin runs (slurmstepd.c _init_from_slurmd,
  // Slurm 22.05 on).
  const char* own = std::getenv("SLURMD_NODENAME");
  NodeRef ref{own ? own : "", -1};
  std::uint32_t id = 0;
  if (!ref.name.empty() || spank_get_item(sp, S_JOB_NODEID, &id) != ESPANK_SUCCESS) return ref;
  // Unset (never, on a supported Slurm): the extern step's node id counts
  // in the job's nodes and the batch script runs on the first; a step's
  // counts in the step's, which only the user's environment lists.
  if (step == kExternStep) ref.jobIndex = static_cast<int>(id);
  if (step == kBatchStep) ref.jobIndex = 0;
  return ref;
}

StepFacts factsOf(spank_t sp, std::uint32_t job, std::uint32_t step) {
  StepFacts facts;
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
  // The account and partition are the job record's (takeRecord), never
  // the environment's: a user sets SLURM_JOB_ACCOUNT as they like.
  return facts;
}

std::string readText(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  char buf[4096];
  ssize_t n = ::read(fd, buf, sizeof buf);
  ::close(fd);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : "";
}

}  // namespace tally::slurm::plugin
