// A lease made from what a client asked for, and a lease to its ledger rows
// and back: the granted and placed rows the daemon writes (ledger/rows.h has
// their bodies), and the lease a restarted daemon rebuilds from them. What
// is written is what is read.
#pragma once

#include <optional>
#include <vector>

#include "config/config.h"
#include "coverage/assess.h"
#include "coverage/handover.h"
#include "daemon/lease.h"
#include "ledger/ledger.h"
#include "ledger/rows.h"
#include "rpc/lease_api.h"

namespace tally::daemon {

// A new queued lease for an acquire (run) or attach request by `owner`,
// planned for the kernel's state (enforce::plan: advisory once the kernel
// charges GTT, unless keep_gpu_memory_max).
std::unique_ptr<Lease> newLease(lease::LeaseKind kind, uid_t owner, pid_t peerPid,
                                std::uint64_t conn, const rpc::api::Declared& d,
                                const config::Daemon& cfg, const enforce::KernelState& kernel);

ledger::GrantedRow grantedRow(const Lease& l);
// The coverage row of this start, and whether it changed from the last one
// recorded (the caller says so in the journal).
ledger::CoverageRow coverageRow(const coverage::Assessment& a, const coverage::Handover& handover,
                                const std::optional<ledger::CoverageRow>& last);
ledger::PlacedRow placedRow(const Lease& l);

// The lease an open lease's rows describe (granted, then started/adopted,
// released, gpu-bound), planned for this start's kernel state (a child is
// nested in its parent by the caller, once the parent is rebuilt), and
// where it was placed when a placed row exists. The error names the damaged row.
Result<std::unique_ptr<Lease>> rebuildLease(const std::vector<ledger::Event>& rows,
                                            const config::Daemon& cfg,
                                            const enforce::KernelState& kernel,
                                            std::optional<ledger::PlacedRow>& placed);

}  // namespace tally::daemon
