#include "slurm/spank_node.h"

#include <fcntl.h>
#include <pwd.h>
#include <unistd.h>

#include <vector>

namespace tally::slurm::plugin {

std::string getenvOf(spank_t sp, const char* name) {
  std::vector<char> buf(4096);
  if (spank_getenv(sp, name, buf.data(), static_cast<int>(buf.size())) != ESPANK_SUCCESS) return "";
  return std::string(buf.data());
}

NodeRef nodeRef(spank_t sp, std::uint32_t step, const Controller& ctl) {
  NodeRef ref{getenvOf(sp, "SLURMD_NODENAME"), -1};
  std::uint32_t id = 0;
  if (!ref.name.empty() || spank_get_item(sp, S_JOB_NODEID, &id) != ESPANK_SUCCESS) return ref;
  if (step == kExternStep) {
    ref.jobIndex = static_cast<int>(id);
  } else if (step == kBatchStep) {
    ref.jobIndex = 0;  // the batch script runs on the job's first node (its BatchHost)
  } else if (getenvOf(sp, "SLURM_HET_SIZE").empty()) {
    // (A het job's step lists all its components' nodes there, while its
    // S_JOB_NODEID counts from its own component's: hetComponentNode.)
    if (std::string list = getenvOf(sp, "SLURM_STEP_NODELIST"); !list.empty())
      ref.name = ctl.hostAt(list, id);
  }
  return ref;
}

std::string hetComponentNode(spank_t sp, std::uint32_t offset, const Controller& ctl) {
  std::uint32_t id = 0;
  if (spank_get_item(sp, S_JOB_NODEID, &id) != ESPANK_SUCCESS) return "";
  for (const char* spelling : {"SLURM_JOB_NODELIST_HET_GROUP_", "SLURM_JOB_NODELIST_PACK_GROUP_"})
    if (std::string list = getenvOf(sp, (spelling + std::to_string(offset)).c_str()); !list.empty())
      return ctl.hostAt(list, id);
  return "";
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
  facts.account = getenvOf(sp, "SLURM_JOB_ACCOUNT");
  facts.partition = getenvOf(sp, "SLURM_JOB_PARTITION");
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
