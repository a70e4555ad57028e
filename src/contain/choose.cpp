#include "contain/choose.h"

#include <fmt/format.h>
#include <unistd.h>

#include "contain/cgroupfs_lease.h"
#include "contain/systemd_lease.h"

namespace tally::contain {
namespace {

Choice refuse(std::string why) { return Choice{nullptr, std::move(why), ""}; }

Choice cgroupfs(const lease::LeaseSpec& spec, const fs::Root& proc, const fs::Root* cgroupRoot,
                std::string note) {
  if (!cgroupRoot) return refuse("the cgroup v2 root cannot be opened (check --cgroup-root)");
  std::string parent;
  if (spec.cgroupParent) {
    auto ok = checkDelegatedParent(*cgroupRoot, *spec.cgroupParent);
    if (!ok) return refuse(ok.error().message);
    parent = *spec.cgroupParent;
  } else {
    auto p = defaultCgroupParent(proc, *cgroupRoot);
    if (!p) return refuse(p.error().message + " (name a delegated subtree with --cgroup-parent)");
    parent = *p;
  }
  return Choice{std::make_unique<CgroupfsLease>(*cgroupRoot, parent, spec), "", std::move(note)};
}

}  // namespace

Choice chooseContainment(const lease::LeaseSpec& spec, const fs::Root& proc,
                         const fs::Root* cgroupRoot, const HostLayout& layout) {
  using lease::Manager;
  switch (spec.manager) {
    case Manager::Cgroupfs:
      return cgroupfs(spec, proc, cgroupRoot, "");
    case Manager::System:
    case Manager::User: {
      auto bus = SystemdBus::connect(spec.manager == Manager::User);
      if (!bus) return refuse(bus.error().message);
      return Choice{std::make_unique<SystemdLease>(std::move(*bus), spec), "", ""};
    }
    case Manager::Auto:
      break;
  }
  bool user = geteuid() != 0;
  auto bus = SystemdBus::connect(user);
  if (bus) return Choice{std::make_unique<SystemdLease>(std::move(*bus), spec), "", ""};
  // No manager answers. A delegated cgroup v2 subtree still gives a real bound.
  Choice fallback =
      cgroupfs(spec, proc, cgroupRoot,
               fmt::format("no systemd {} manager ({}); using a delegated cgroup v2 subtree",
                           user ? "user" : "system", bus.error().message));
  if (fallback.lease) return fallback;
  // A host whose layout cannot contain a lease says so in its own terms (as
  // tally doctor does); otherwise both attempts explain themselves.
  if (layout.problems.empty()) return refuse(bus.error().message + "; " + fallback.refusal);
  std::string why = fmt::format("{}", fmt::join(layout.problems, "; "));
  if (layout.systemd) why += "; " + bus.error().message;
  return refuse(why);
}

}  // namespace tally::contain
