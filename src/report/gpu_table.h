// `tally gpu`'s table, grouped by process, cgroup or container.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "gpumem/aggregate.h"
#include "host/snapshot.h"
#include "scanner/scan.h"

namespace tally::report {

using gpumem::Aggregate;

enum class GroupBy { kProcess, kCgroup, kContainer };

// `userName` turns a process's uid into the USER column's text (the caller's
// NSS look-up; the table stays pure).
using UserNameFn = std::function<std::string(std::uint32_t uid)>;
std::string gpuTable(const scanner::Scan& scan, const Aggregate& agg, const host::Snapshot& host,
                     GroupBy by, const UserNameFn& userName);

}  // namespace tally::report
