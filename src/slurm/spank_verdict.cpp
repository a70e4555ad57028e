#include "slurm/spank_verdict.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

extern "C" {
#include <slurm/spank.h>
}

namespace tally::slurm::plugin {

Verdict* mapVerdict() {
  void* page =
      ::mmap(nullptr, sizeof(Verdict), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  return page != MAP_FAILED ? static_cast<Verdict*>(page) : nullptr;
}

void refuseTask(Verdict* verdict, pid_t task, const std::string& why) {
  slurm_error("%s", why.c_str());
  if (verdict) {
    std::size_t n = std::min(why.size(), sizeof verdict->reason - 1);
    std::memcpy(verdict->reason, why.data(), n);
    verdict->reason[n] = '\0';
    verdict->state = Verdict::kRefused;
  } else {
    ::kill(task, SIGKILL);
  }
}

void exitIfRefused(const Verdict* verdict) {
  if (!verdict || verdict->state != Verdict::kRefused) return;
  std::string line = std::string(verdict->reason) + "\n";
  [[maybe_unused]] auto n = ::write(STDERR_FILENO, line.data(), line.size());
  ::_exit(1);
}

}  // namespace tally::slurm::plugin
