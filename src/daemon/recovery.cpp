#include "daemon/recovery.h"

#include <fmt/format.h>

#include <algorithm>

#include "daemon/lease_rows.h"
#include "ledger/rows.h"
#include "util/clock.h"

namespace tally::daemon {

using json = nlohmann::json;

Result<std::vector<std::string>> recover(const config::Daemon& cfg, RecoveryEnv env,
                                         ledger::Ledger& ledger, LeaseBook& book,
                                         LeaseEvents& events, Endings& endings, Sampler& sampler,
                                         const coverage::Handover& handover) {
  std::vector<std::string> log;
  auto open = ledger.openLeases();
  if (!open)
    return Error{
        0, fmt::format("cannot read the open leases from the ledger: {}", open.error().message)};
  for (const auto& rows : *open) {
    std::optional<ledger::PlacedRow> placed;
    auto rebuilt = rebuildLease(rows, cfg, handover, placed);
    if (!rebuilt)
      return Error{0, fmt::format("cannot read the open leases from the ledger: {}",
                                  rebuilt.error().message)};
    std::string id = (*rebuilt)->id;
    if (auto s = book.hold(std::move(*rebuilt)); !s)
      log.push_back(
          fmt::format("lease {}: re-admitted over its pools' limits: {}", id, s.error().message));
    Lease& ref = *book.find(id);
    if (!placed) {
      // Granted, never started: a run lease's client may still be setting up.
      ref.state = Lease::State::Granted;
      ref.graceDeadlineUs = clock::monotonicUs() + cfg.clientGraceUs;
      log.push_back(
          fmt::format("lease {} ({}): granted, not started; waiting for its client to resume",
                      ref.id, ref.name));
      continue;
    }
    ref.unit = placed->unit;
    ref.cgroup = placed->cgroup;
    ref.countersCgroup = placed->countersCgroup;
    ref.inode = placed->inode;
    ref.state = Lease::State::Running;
    // Same identity: the unit still has this cgroup, and the directory is the
    // very one (inode), not a new cgroup of the same name.
    std::string why;
    if (!env.cgroupRoot) {
      why = "the daemon has no cgroup v2 root";
    } else if (auto cg = cgroup::Cgroup::open(*env.cgroupRoot, ref.cgroup); !cg) {
      why = fmt::format("its cgroup {} is gone", ref.cgroup);
    } else if (cg->inode() != ref.inode) {
      why = fmt::format("cgroup {} was re-created (inode {} is not the recorded {})", ref.cgroup,
                        cg->inode(), ref.inode);
    } else {
      if (ref.isAttach() && !ref.unit.empty() && env.units) {
        auto unitCg = env.units->controlGroup(ref.unit);
        if (unitCg && *unitCg != ref.cgroup)
          why = fmt::format("unit {} now has cgroup '{}'", ref.unit, *unitCg);
      }
      if (why.empty()) {
        ref.cg = std::make_unique<cgroup::Cgroup>(std::move(*cg));
        if (ref.countersCgroup == ref.cgroup) {
          if (auto again = cgroup::Cgroup::open(*env.cgroupRoot, ref.cgroup))
            ref.countersCg = std::make_unique<cgroup::Cgroup>(std::move(*again));
        } else if (auto counters = cgroup::Cgroup::open(*env.cgroupRoot, ref.countersCgroup)) {
          ref.countersCg = std::make_unique<cgroup::Cgroup>(std::move(*counters));
        }
      }
    }
    if (why.empty() && ref.isAttach() && !Endings::populated(ref))
      why = fmt::format("cgroup {} emptied while the daemon was down", ref.cgroup);
    if (!why.empty() && ref.isAttach()) {
      log.push_back(fmt::format("lease {} ({}): lost: {}", ref.id, ref.name, why));
      endings.lost(ref, why + " (the daemon was not running)");
      continue;
    }
    if (!why.empty()) {
      // A run lease's client holds the outcome; it may still report it.
      log.push_back(fmt::format("lease {} ({}): {}; waiting for its client to report", ref.id,
                                ref.name, why));
      ref.graceDeadlineUs = clock::monotonicUs() + cfg.clientGraceUs;
      continue;
    }
    (void)events.record(ref, ledger::kReadopted, ledger::encode(placedRow(ref)));
    sampler.startMetering(ref);
    if (ref.target && ref.target->pid) (void)env.watches.watchPid(ref.id, *ref.target->pid);
    if (ref.isRun()) ref.graceDeadlineUs = clock::monotonicUs() + cfg.clientGraceUs;
    log.push_back(fmt::format("lease {} ({}): re-adopted {}", ref.id, ref.name, ref.cgroup));
  }
  return log;
}

}  // namespace tally::daemon
