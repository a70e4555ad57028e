// A lease to its ledger rows and back: the granted and placed rows the
// daemon writes (ledger/rows.h has their bodies), and the lease a restarted
// daemon rebuilds from them. What is written is what is read.
#pragma once

#include <optional>
#include <vector>

#include "config/config.h"
#include "coverage/handover.h"
#include "daemon/lease.h"
#include "ledger/ledger.h"
#include "ledger/rows.h"

namespace tally::daemon {

ledger::GrantedRow grantedRow(const Lease& l);
ledger::PlacedRow placedRow(const Lease& l);

// The lease an open lease's rows describe (granted, then started/adopted,
// released, gpu-bound), and where it was placed when a placed row exists.
// The error names the damaged row.
Result<std::unique_ptr<Lease>> rebuildLease(const std::vector<ledger::Event>& rows, const config::Daemon& cfg,
                                            const coverage::Handover& handover, std::optional<ledger::PlacedRow>& placed);

}  // namespace tally::daemon
