#include "contain/cgroupfs_lease.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>

#include "contain/placement.h"
#include "lease/unit_names.h"
#include "probes/cgroup_memory.h"
#include "probes/proc_cgroup.h"
#include "util/clock.h"
#include "util/text.h"

namespace tally::contain {

Status checkDelegatedParent(const fs::Root& cgroupRoot, const std::string& parent) {
  if (parent.find("..") != std::string::npos)
    return Error{EINVAL, fmt::format("cgroup parent {} climbs with '..'", parent)};
  auto cg = cgroup::Cgroup::open(cgroupRoot, parent.empty() ? "/" : parent);
  if (!cg)
    return Error{cg.error().code,
                 fmt::format("{} is not a cgroup v2 directory: {}", parent, cg.error().message)};
  auto memory = cg->delegates("memory");
  if (!memory) {
    return Error{memory.error().code, fmt::format("{} is not a cgroup v2 directory: {}",
                                                  cg->describe(""), memory.error().message)};
  }
  if (!*memory) {
    auto now = cg->read(cgroup::file::kSubtreeControl);
    return Error{0, fmt::format("memory controller not delegated to {}: its {} is '{}'; enable it "
                                "(echo +memory > {}) or use systemd",
                                cg->describe(""), cgroup::file::kSubtreeControl,
                                now ? std::string(text::trim(*now)) : std::string("?"),
                                cg->describe(cgroup::file::kSubtreeControl))};
  }
  std::string rel = fs::joinPath(parent, "");  // "" for the root, else "a/b/"
  if (!rel.empty()) rel.pop_back();
  std::string dir = rel.empty() ? "." : rel;
  if (::faccessat(cgroupRoot.fd(), dir.c_str(), W_OK, AT_EACCESS) != 0) {
    return Error{errno, fmt::format("cannot create lease cgroups in {}: not writable by uid {}",
                                    cgroupRoot.describe(rel), geteuid())};
  }
  return Ok{};
}

Result<std::string> defaultCgroupParent(const fs::Root& proc, const fs::Root& cgroupRoot) {
  auto text = proc.read("self/cgroup", 64 * 1024);
  if (!text) return text.error();
  auto own = probes::parseProcCgroup(*text);
  if (!own)
    return Error{0, "tally is not in a cgroup v2 hierarchy (no 0:: line in /proc/self/cgroup)"};
  if (own->outsideNamespace) return Error{0, "tally's cgroup is outside its cgroup namespace"};
  std::string parent = cgroupfsParent(own->path);
  auto ok = checkDelegatedParent(cgroupRoot, parent);
  if (!ok) return ok.error();
  return parent;
}

CgroupfsLease::CgroupfsLease(const fs::Root& cgroupRoot, std::string parent,
                             const lease::LeaseSpec& spec)
    : root_(cgroupRoot), parent_(std::move(parent)), spec_(spec) {
  rel_ = fs::joinPath(parent_, lease::leaseCgroupName(spec.id));
  // fmt, not operator+: g++ 12 -O2 warns falsely (-Wrestrict) on the concatenation.
  cgroup_ = fmt::format("/{}", rel_);
}

std::string CgroupfsLease::delegationHint() const {
  return fmt::format("; enable it in {}",
                     root_.describe(fs::joinPath(parent_, cgroup::file::kSubtreeControl)));
}

Status CgroupfsLease::place(pid_t pid) {
  if (auto ok = checkDelegatedParent(root_, parent_); !ok) return ok;
  if (::mkdirat(root_.fd(), rel_.c_str(), 0755) != 0) {
    return errnoError(errno, fmt::format("create lease cgroup {}", root_.describe(rel_)));
  }
  created_ = true;
  auto cg = cgroup::Cgroup::open(root_, cgroup_);
  if (!cg) return cg.error();
  cg_.emplace(std::move(*cg));
  // Limits before the process moves in, so it never runs unbounded.
  Status s = Ok{};
  if (auto max = spec_.memoryMax()) s = cg_->setMemoryMax(*max);
  if (s && spec_.memoryHigh) s = cg_->setMemoryHigh(*spec_.memoryHigh);
  if (s && spec_.memorySwapMax) s = cg_->setMemorySwapMax(*spec_.memorySwapMax);
  // OOMPolicy=kill is memory.oom.group=1; continue and stop leave it 0 (stop
  // is enforced by the runner, which ends the lease on the first oom_kill).
  if (s && spec_.oomPolicy == lease::OomPolicy::Kill) s = cg_->setOomGroup(true);
  if (s) s = cg_->addProcess(pid);
  return s;
}

Status CgroupfsLease::signalAll(int sig) {
  auto procs = cg_->procs();
  if (!procs) return procs.error();
  for (pid_t pid : *procs) ::kill(pid, sig);
  return Ok{};
}

Status CgroupfsLease::killAll() {
  if (!created_ || !cg_) return Ok{};
  if (auto s = cg_->kill(); s) return s;
  return signalAll(SIGKILL);  // before 5.14 there is no cgroup.kill
}

Status CgroupfsLease::stop() {
  if (!created_ || !cg_) return Ok{};
  return signalAll(SIGTERM);
}

Status CgroupfsLease::waitEmpty(std::uint64_t timeoutUs) {
  std::uint64_t deadline = clock::monotonicUs() + timeoutUs;
  for (;;) {
    auto populated = cg_->populated();
    if (!populated) return populated.error();
    if (!*populated) return Ok{};
    if (clock::monotonicUs() >= deadline)
      return Error{ETIMEDOUT, fmt::format("{} still has processes", cgroup_)};
    ::usleep(10000);
  }
}

Status CgroupfsLease::endWorkload() {
  if (!created_ || ended_ || !cg_) return Ok{};
  if (auto s = killAll(); !s) return s;
  if (auto s = waitEmpty(10'000'000); !s) return s;
  ended_ = true;
  return Ok{};
}

Status CgroupfsLease::release() {
  if (!created_) return Ok{};
  if (!cg_) {
    // Created but never opened: nothing ran in it.
    if (::unlinkat(root_.fd(), rel_.c_str(), AT_REMOVEDIR) == 0) created_ = false;
    return Ok{};
  }
  if (auto s = endWorkload(); !s) return s;  // a refused lease was never ended
  if (::unlinkat(root_.fd(), rel_.c_str(), AT_REMOVEDIR) != 0) {
    return errnoError(errno, fmt::format("remove lease cgroup {}", root_.describe(rel_)));
  }
  created_ = false;
  return Ok{};
}

}  // namespace tally::contain
