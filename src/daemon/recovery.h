// After a restart (kill -9 included): the leases the ledger says are open are
// read back from their rows (ledger/rows.h, the same types they were written
// with) and re-adopted when the very cgroup still runs (same unit, same
// inode), closed as lost when it is gone, or held for their client. A class
// like Endings: its collaborators are given once, each step is a method.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "coverage/handover.h"
#include "daemon/endings.h"
#include "daemon/lease_book.h"
#include "daemon/lease_events.h"
#include "daemon/sampler.h"
#include "daemon/seams.h"
#include "fs/root.h"
#include "ledger/ledger.h"
#include "ledger/rows.h"

namespace tally::daemon {

struct RecoveryEnv {
  const fs::Root* cgroupRoot;
  Watches& watches;
  Units* units;
};

class Recovery {
 public:
  Recovery(const config::Daemon& cfg, RecoveryEnv env, ledger::Ledger& ledger, LeaseBook& book,
           LeaseEvents& events, Endings& endings, Sampler& sampler)
      : cfg_(cfg),
        env_(env),
        ledger_(ledger),
        book_(book),
        events_(events),
        endings_(endings),
        sampler_(sampler) {}

  // One line per lease for the log; an error when the open leases cannot be
  // read (the daemon must not start then: it would grant their pools twice).
  Result<std::vector<std::string>> run();

 private:
  // Holds the lease's very cgroup again; the reason when it cannot (gone,
  // re-created, its unit moved, emptied while the daemon was down).
  std::optional<std::string> reopen(Lease& l, const ledger::PlacedRow& placed);
  std::string resume(Lease& l, const ledger::PlacedRow& placed);

  const config::Daemon& cfg_;
  RecoveryEnv env_;
  ledger::Ledger& ledger_;
  LeaseBook& book_;
  LeaseEvents& events_;
  Endings& endings_;
  Sampler& sampler_;
};

}  // namespace tally::daemon
