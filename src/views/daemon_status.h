// `tally daemon status`: what the running daemon says of itself, from its
// overview reply: since when, how many leases, whether the kernel charge
// and refusal are active (and if not exactly why), what MemoryMax covers on
// this kernel, and whether the ledger writes. Pure: the reply in, lines out.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tally::views {

struct DaemonStatus {
  std::vector<std::string> lines;
  bool ledgerWrites = true;  // false: new leases and releases are refused
};

DaemonStatus daemonStatus(const nlohmann::json& overview, std::uint64_t nowNs, bool utc);

}  // namespace tally::views
