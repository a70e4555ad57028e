#include "host/snapshot.h"

#include <unistd.h>

#include "util/clock.h"

namespace tally::host {

Snapshot readSnapshot(const fs::Root& proc, const fs::Root& sys, std::uint64_t pageSize) {
  Snapshot s;
  s.readAtUs = clock::monotonicUs();
  s.pageSize = pageSize != 0 ? pageSize : static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  if (auto m = proc.read("meminfo", 64 * 1024))
    s.meminfo = probes::parseMemInfo(*m);
  else
    s.meminfoError = m.error().message;
  if (auto r = proc.read("sys/kernel/osrelease", 256)) {
    s.kernel = probes::parseKernelRelease(*r);
    if (!s.kernel) s.kernelError = proc.describe("sys/kernel/osrelease") + " is not a release";
  } else {
    s.kernelError = r.error().message;
  }
  if (auto d = devices::discoverDrmDevices(sys))
    s.devices = std::move(*d);
  else
    s.devicesError = d.error().message;
  s.ttm = devices::readTtmModules(sys);
  s.amdgpu = devices::readAmdgpuParams(sys);
  s.kfdLimits = devices::kfdLimits({s.kernel, s.meminfo.memTotal, &s.ttm, &s.amdgpu, s.pageSize});
  s.kfd = scanner::readKfdIndex(sys);
  return s;
}

Snapshot& SnapshotCache::fresh() {
  last_.emplace(readSnapshot(proc_, sys_, pageSize_));
  return *last_;
}

const Snapshot& SnapshotCache::recent() {
  if (last_ && clock::monotonicUs() - last_->readAtUs <= 100'000) return *last_;
  return fresh();
}

}  // namespace tally::host
