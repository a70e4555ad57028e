#include "cli/host_facts.h"

namespace tally::cli {

report::HostFacts readHostFacts(const fs::Root& proc, const fs::Root& sys) {
  report::HostFacts host;
  if (auto m = proc.read("meminfo", 1 << 16))
    host.meminfo = probes::parseMemInfo(*m);
  else
    host.meminfoError = m.error().message;
  // pages_limit counts pages of the kernel's PAGE_SIZE, the same as ours.
  host.pageSize = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  host.ttm = devices::readTtmModules(sys);
  host.gttsize = devices::readAmdgpuGttsize(sys);
  return host;
}

}  // namespace tally::cli
