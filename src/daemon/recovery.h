// After a restart (kill -9 included): the leases the ledger says are open are
// read back from their rows (ledger/rows.h, the same types they were written
// with) and re-adopted when the very cgroup still runs (same unit, same
// inode), closed as lost when it is gone, or held for their client.
#pragma once

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

namespace tally::daemon {

struct RecoveryEnv {
  const fs::Root* cgroupRoot;
  Watches& watches;
  Units* units;
};

// One line per lease for the log; an error when the open leases cannot be
// read (the daemon must not start then: it would grant their pools twice).
Result<std::vector<std::string>> recover(const config::Daemon& cfg, RecoveryEnv env,
                                         ledger::Ledger& ledger, LeaseBook& book,
                                         LeaseEvents& events, Endings& endings, Sampler& sampler,
                                         const coverage::Handover& handover);

}  // namespace tally::daemon
