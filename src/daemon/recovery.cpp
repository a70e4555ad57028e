#include "daemon/recovery.h"

#include <fmt/format.h>

#include <algorithm>

#include "daemon/lease_rows.h"
#include "daemon/placement.h"
#include "util/clock.h"

namespace tally::daemon {

Result<std::vector<std::string>> Recovery::run() {
  std::vector<std::string> log;
  auto open = ledger_.openLeases();
  if (!open)
    return Error{
        0, fmt::format("cannot read the open leases from the ledger: {}", open.error().message)};
  // Every open lease rebuilt first, then parents before children: the
  // ledger lists them by id, and a child must find its parent (to nest in
  // its bound, or to end with it when it ended while the daemon was down).
  struct Rebuilt {
    std::unique_ptr<Lease> lease;
    std::optional<ledger::PlacedRow> placed;
  };
  std::vector<Rebuilt> all;
  for (const auto& rows : *open) {
    Rebuilt r;
    auto rebuilt = rebuildLease(rows, cfg_, sampler_.kernelState(), r.placed);
    if (!rebuilt)
      return Error{0, fmt::format("cannot read the open leases from the ledger: {}",
                                  rebuilt.error().message)};
    r.lease = std::move(*rebuilt);
    all.push_back(std::move(r));
  }
  std::stable_partition(all.begin(), all.end(),
                        [](const Rebuilt& r) { return r.lease->parent.empty(); });
  for (auto& [rebuilt, placed] : all) {
    std::string id = rebuilt->id;
    if (auto s = book_.hold(std::move(rebuilt)); !s)
      log.push_back(
          fmt::format("lease {}: re-admitted over its pools' limits: {}", id, s.error().message));
    Lease& l = *book_.find(id);
    // A child's plan holds it to its parent's bound again.
    if (!l.parent.empty())
      if (const Lease* parent = book_.find(l.parent)) l.nestIn(*parent);
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
  if (auto why = reopenPlacement(env_.cgroupRoot, env_.units, l, placed)) return why;
  // A child ends with its parent: one that ended while the daemon was down
  // (or was lost just now, before its children were read) takes it along,
  // or a child kept while empty would wait for a parent that never comes.
  if (!l.parent.empty() && !book_.find(l.parent))
    return fmt::format("its parent lease {} ended while the daemon was down", l.parent);
  // Emptied with nobody to say how it ended: lost. Its attacher promised that
  // word (the Slurm plugin, waiting at the step's end with the cgroup kept):
  // re-adopted, the outcome waits for it as before the restart.
  if (l.isAttach() && Endings::over(l) && !l.ending().awaitsReport)
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
