#include "contain/cgroupfs_lease.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>

#include "probes/cgroup_memory.h"
#include "probes/proc_cgroup.h"
#include "util/clock.h"
#include "util/text.h"

namespace tally::contain {

Status checkDelegatedParent(const fs::Root& cgroupRoot, const std::string& parent) {
  if (parent.find("..") != std::string::npos) return Error{EINVAL, fmt::format("cgroup parent {} climbs with '..'", parent)};
  std::string rel = fs::joinPath(parent, "");  // "" for the root, else "a/b/"
  if (!rel.empty()) rel.pop_back();
  std::string dir = rel.empty() ? "." : rel;
  auto controllers = cgroupRoot.read(fs::joinPath(rel, "cgroup.subtree_control"), 4096);
  if (!controllers) {
    return Error{controllers.error().code,
                 fmt::format("{} is not a cgroup v2 directory: {}", cgroupRoot.describe(rel), controllers.error().message)};
  }
  if (!text::hasWord(text::trim(*controllers), "memory")) {
    return Error{0, fmt::format("memory controller not delegated to {}: its cgroup.subtree_control is '{}'; "
                                "enable it (echo +memory > {}/cgroup.subtree_control) or use systemd",
                                cgroupRoot.describe(rel), text::trim(*controllers), cgroupRoot.describe(rel))};
  }
  if (::faccessat(cgroupRoot.fd(), dir.c_str(), W_OK, AT_EACCESS) != 0) {
    return Error{errno, fmt::format("cannot create lease cgroups in {}: not writable by uid {}", cgroupRoot.describe(rel), geteuid())};
  }
  return Ok{};
}

Result<std::string> defaultCgroupParent(const fs::Root& proc, const fs::Root& cgroupRoot) {
  auto text = proc.read("self/cgroup", 64 * 1024);
  if (!text) return text.error();
  auto own = probes::parseProcCgroup(*text);
  if (!own) return Error{0, "tally is not in a cgroup v2 hierarchy (no 0:: line in /proc/self/cgroup)"};
  if (own->outsideNamespace) return Error{0, "tally's cgroup is outside its cgroup namespace"};
  std::string_view up = fs::parentPath(own->path);
  std::string parent(up.empty() ? std::string_view("/") : up);
  auto ok = checkDelegatedParent(cgroupRoot, parent);
  if (!ok) return ok.error();
  return parent;
}

CgroupfsLease::CgroupfsLease(const fs::Root& cgroupRoot, std::string parent, const lease::LeaseSpec& spec)
    : root_(cgroupRoot), parent_(std::move(parent)), spec_(spec) {
  rel_ = fs::joinPath(parent_, fmt::format("tally-{}", spec.id));
  // fmt, not operator+: g++ 12 -O2 warns falsely (-Wrestrict) on the concatenation.
  cgroup_ = fmt::format("/{}", rel_);
}

std::string CgroupfsLease::delegationHint() const {
  return fmt::format("; enable it in {}", root_.describe(fs::joinPath(parent_, "cgroup.subtree_control")));
}

Status CgroupfsLease::writeFile(const char* file, const std::string& value) {
  return root_.write(fs::joinPath(rel_, file), value);
}

Status CgroupfsLease::place(pid_t pid) {
  if (auto ok = checkDelegatedParent(root_, parent_); !ok) return ok;
  if (::mkdirat(root_.fd(), rel_.c_str(), 0755) != 0) {
    return errnoError(errno, fmt::format("create lease cgroup {}", root_.describe(rel_)));
  }
  created_ = true;
  // Limits before the process moves in, so it never runs unbounded.
  Status s = Ok{};
  if (spec_.memoryMax) s = writeFile("memory.max", std::to_string(*spec_.memoryMax));
  if (s && spec_.memoryHigh) s = writeFile("memory.high", std::to_string(*spec_.memoryHigh));
  if (s && spec_.memorySwapMax) s = writeFile("memory.swap.max", std::to_string(*spec_.memorySwapMax));
  // OOMPolicy=kill is memory.oom.group=1; continue and stop leave it 0 (stop
  // is enforced by the runner, which ends the lease on the first oom_kill).
  if (s && spec_.oomPolicy == lease::OomPolicy::Kill) s = writeFile("memory.oom.group", "1");
  if (s) s = writeFile("cgroup.procs", std::to_string(pid));
  return s;
}

Status CgroupfsLease::signalAll(int sig) {
  auto procs = root_.read(rel_ + "/cgroup.procs", 1 << 20);
  if (!procs) return procs.error();
  text::LineReader lines(*procs);
  while (auto line = lines.next()) {
    if (auto pid = text::parseU64(text::trim(*line))) ::kill(static_cast<pid_t>(*pid), sig);
  }
  return Ok{};
}

Status CgroupfsLease::killAll() {
  if (!created_) return Ok{};
  if (auto s = writeFile("cgroup.kill", "1"); s) return s;
  return signalAll(SIGKILL);  // before 5.14 there is no cgroup.kill
}

Status CgroupfsLease::stop() {
  if (!created_) return Ok{};
  return signalAll(SIGTERM);
}

Status CgroupfsLease::waitEmpty(std::uint64_t timeoutUs) {
  std::uint64_t deadline = clock::monotonicUs() + timeoutUs;
  for (;;) {
    auto events = root_.read(rel_ + "/cgroup.events", 256);
    if (!events) return events.error();
    auto parsed = probes::parseFlatKeyed(*events);
    if (parsed && parsed->get("populated") == std::uint64_t{0}) return Ok{};
    if (clock::monotonicUs() >= deadline) return Error{ETIMEDOUT, fmt::format("{} still has processes", cgroup_)};
    ::usleep(10000);
  }
}

Status CgroupfsLease::endWorkload() {
  if (!created_ || ended_) return Ok{};
  if (auto s = killAll(); !s) return s;
  if (auto s = waitEmpty(10'000'000); !s) return s;
  ended_ = true;
  return Ok{};
}

Status CgroupfsLease::release() {
  if (!created_) return Ok{};
  if (auto s = endWorkload(); !s) return s;  // a refused lease was never ended
  if (::unlinkat(root_.fd(), rel_.c_str(), AT_REMOVEDIR) != 0) {
    return errnoError(errno, fmt::format("remove lease cgroup {}", root_.describe(rel_)));
  }
  created_ = false;
  return Ok{};
}

}  // namespace tally::contain
