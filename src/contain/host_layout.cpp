#include "contain/host_layout.h"

#include "cgroup/cgroup.h"
#include "probes/mountinfo.h"
#include "util/text.h"

namespace tally::contain {
namespace {

std::string firstLine(const Result<std::string>& r) {
  if (!r) return "";
  return std::string(text::trim(std::string_view(*r).substr(0, r->find('\n'))));
}

}  // namespace

std::string HostLayout::memoryController() const {
  return memoryOnV2 ? "cgroup v2" : !memoryV1Mounts.empty() ? "cgroup v1" : "absent";
}

std::string kernelRelease(const fs::Root& proc) {
  return firstLine(proc.read("sys/kernel/osrelease", 256));
}

HostLayout readHostLayout(const fs::Root& proc, const fs::Root* cgroupRoot,
                          const std::string& cgroupError) {
  HostLayout h;
  h.kernel = kernelRelease(proc);
  h.pid1 = firstLine(proc.read("1/comm", 256));
  h.systemd = h.pid1 == "systemd";
  if (cgroupRoot) {
    auto controllers = cgroupRoot->read(cgroup::file::kControllers, 4096);
    h.v2Root = controllers.ok();
    if (h.v2Root) {
      h.controllers = firstLine(controllers);
      h.memoryOnV2 = text::hasWord(h.controllers, "memory");
      h.v2RootEvidence = cgroupRoot->describe(cgroup::file::kControllers);
    } else {
      h.v2RootEvidence = controllers.error().message;
    }
  } else {
    h.v2RootEvidence = cgroupError;
  }
  if (auto mi = proc.read("self/mountinfo", 1 << 20)) {
    for (const auto& m : probes::parseMountinfo(*mi)) {
      if (m.fsType == "cgroup2") h.v2Mounts.push_back(m.mountPoint);
      if (m.fsType == "cgroup" && text::hasWord(m.superOptions, "memory", ','))
        h.memoryV1Mounts.push_back(m.mountPoint);
    }
  }
  if (!h.systemd)
    h.problems.push_back("no systemd (PID 1 is " + (h.pid1.empty() ? "unknown" : h.pid1) + ")");
  if (!h.memoryOnV2) {
    h.problems.push_back(!h.memoryV1Mounts.empty() ? "memory controller is on cgroup v1"
                         : h.v2Root ? "memory controller not enabled at the cgroup v2 root"
                                    : "no cgroup v2 memory controller");
  }
  // Without systemd a delegated v2 subtree is enough (tally run --cgroupfs).
  if (!h.systemd && h.memoryOnV2) h.problems.clear();
  return h;
}

}  // namespace tally::contain
