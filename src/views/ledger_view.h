// `tally ledger` as a table a person reads: which outcome rows to show (the
// filters) and how (columns that stay aligned, local or UTC time). Pure: rows
// and "now" come in, lines go out; cli/cmd_ledger.cpp does the I/O.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ledger/ledger.h"
#include "util/result.h"

namespace tally::views {

struct LedgerFilter {
  std::optional<std::uint64_t> sinceNs, untilNs;  // on the lease's start time
  std::string name;                               // exact lease name
  std::string outcome;                            // exact outcome class
  std::string lease;                              // lease id prefix
  std::optional<std::uint32_t> owner;             // only this uid's leases
  std::size_t last = 20;                          // the newest this many that match (0: all)
};

// "2026-11-30", "2026-11-30 14:05", "2026-11-30T14:05:09" (local time, or UTC
// with `utc`), or a duration ago ("90m", "2h", "3d"). The error says what is
// accepted.
Result<std::uint64_t> parseWhen(std::string_view text, std::uint64_t nowNs, bool utc);

// "2026-11-30 14:05:09" in local time (or UTC with `utc`); "-" for 0.
std::string wallTime(std::uint64_t ns, bool utc);

std::vector<ledger::Row> filterRows(const std::vector<ledger::Row>& rows, const LedgerFilter& f);

// Header and one line per row: SEQ, STARTED, DURATION, LEASE, NAME, POOL,
// OUTCOME, EXIT, MEM PEAK, GPU PEAK. A figure the record lacks is "-"; a long
// name or pool is cut with "…" so the columns stay aligned. A last line says
// why SEQ has gaps when it has (the chain's lifecycle rows lie between).
// USER is `userName` of the record's lease.owner_uid ("-" for a row that names none).
using UserNameFn = std::function<std::string(std::uint32_t uid)>;
std::vector<std::string> ledgerTable(const std::vector<ledger::Row>& rows, bool utc,
                                     const UserNameFn& userName);

// The owner an outcome record names (lease.owner_uid); absent: none.
std::optional<std::uint32_t> ownerOf(const std::string& recordJson);

}  // namespace tally::views
