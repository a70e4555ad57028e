#include "daemon/recovery.h"

#include <fmt/format.h>

#include "daemon/lease_rows.h"
#include "util/clock.h"

namespace tally::daemon {

Result<std::vector<std::string>> Recovery::run() {
  std::vector<std::string> log;
  auto open = ledger_.openLeases();
  if (!open)
    return Error{
        0, fmt::format("cannot read the open leases from the ledger: {}", open.error().message)};
  for (const auto& rows : *open) {
    std::optional<ledger::PlacedRow> placed;
    auto rebuilt = rebuildLease(rows, cfg_, handover_, placed);
    if (!rebuilt)
      return Error{0, fmt::format("cannot read the open leases from the ledger: {}",
                                  rebuilt.error().message)};
    std::string id = (*rebuilt)->id;
    if (auto s = book_.hold(std::move(*rebuilt)); !s)
      log.push_back(
          fmt::format("lease {}: re-admitted over its pools' limits: {}", id, s.error().message));
    Lease& l = *book_.find(id);
    if (!placed) {
      // Granted, never started: a run lease's client may still be setting up.
      l.awaitClient(clock::monotonicUs(), cfg_.clientGraceUs);
      log.push_back(fmt::format(
          "lease {} ({}): granted, not started; waiting for its client to resume", l.id, l.name()));
      continue;
    }
    log.push_back(resume(l, *placed));
  }
  return log;
}

std::optional<std::string> Recovery::reopen(Lease& l, const ledger::PlacedRow& placed) {
  l.place.unit = placed.unit;
  l.place.cgroup = placed.cgroup;
  l.place.countersCgroup = placed.countersCgroup;
  l.place.inode = placed.inode;
  if (!env_.cgroupRoot) return "the daemon has no cgroup v2 root";
  // Same identity: the unit still has this cgroup, and the directory is the
  // very one (inode), not a new cgroup of the same name.
  auto cg = cgroup::Cgroup::open(*env_.cgroupRoot, l.place.cgroup);
  if (!cg) return fmt::format("its cgroup {} is gone", l.place.cgroup);
  if (cg->inode() != l.place.inode)
    return fmt::format("cgroup {} was re-created (inode {} is not the recorded {})", l.place.cgroup,
                       cg->inode(), l.place.inode);
  if (l.isAttach() && !l.place.unit.empty() && env_.units) {
    auto unitCg = env_.units->controlGroup(l.place.unit);
    if (unitCg && *unitCg != l.place.cgroup)
      return fmt::format("unit {} now has cgroup '{}'", l.place.unit, *unitCg);
  }
  if (l.isAttach() && !l.place.unit.empty() && env_.units) {
    // The same cgroup directory is the same run: its invocation is today's.
    if (auto run = env_.units->run(l.place.unit)) l.place.invocation = run->invocation;
  }
  l.place.cg = std::make_unique<cgroup::Cgroup>(std::move(*cg));
  if (auto counters = cgroup::Cgroup::open(*env_.cgroupRoot, l.place.countersCgroup))
    l.place.countersCg = std::make_unique<cgroup::Cgroup>(std::move(*counters));
  // Emptied with nobody to say how it ended: lost. Its attacher promised that
  // word (the Slurm plugin, waiting at the step's end with the cgroup kept):
  // re-adopted, the outcome waits for it as before the restart.
  if (l.isAttach() && !Endings::populated(l) && !l.ending.awaitsReport)
    return fmt::format("cgroup {} emptied while the daemon was down", l.place.cgroup);
  return std::nullopt;
}

std::string Recovery::resume(Lease& l, const ledger::PlacedRow& placed) {
  if (auto why = reopen(l, placed)) {
    // Its cgroup is gone but the kernel may still hold buffers it made: the
    // lease claims its entry, so its end retires it under its own name (said,
    // and counted against its pools until freed).
    sampler_.claimCharge(l, placed.inode);
    if (l.isAttach()) {
      std::string line = fmt::format("lease {} ({}): lost: {}", l.id, l.name(), *why);
      endings_.lost(l, *why + " (the daemon was not running)");  // frees l
      return line;
    }
    // A run lease's client holds the outcome; it may still report it.
    l.awaitClient(clock::monotonicUs(), cfg_.clientGraceUs);
    return fmt::format("lease {} ({}): {}; waiting for its client to report", l.id, l.name(), *why);
  }
  (void)events_.record(l, ledger::kReadopted, ledger::encode(placedRow(l)));
  // Its charge kept running while no daemon did: armed again with it. A
  // lease that ran before cannot be refused now; one the charge cannot cover
  // any more is metered from fdinfo, and said.
  if (auto s = sampler_.arm(l, true); !s)
    events_.note(3,
                 fmt::format("{}; it runs on, metered from fdinfo and bounded by the sampled kill",
                             s.error().message),
                 {{"TALLY_LEASE", l.id}});
  sampler_.startMetering(l);
  if (l.target && l.target->pid) (void)env_.watches.watchPid(l.id, *l.target->pid);
  if (l.isRun()) l.awaitClient(clock::monotonicUs(), cfg_.clientGraceUs);
  return fmt::format("lease {} ({}): re-adopted {}", l.id, l.name(), l.place.cgroup);
}

}  // namespace tally::daemon
