// `tally gpu`'s table, grouped by process, cgroup or container.
#pragma once

#include <string>

#include "gpumem/aggregate.h"
#include "host/snapshot.h"
#include "scanner/scan.h"

namespace tally::report {

using gpumem::Aggregate;

enum class GroupBy { kProcess, kCgroup, kContainer };

std::string gpuTable(const scanner::Scan& scan, const Aggregate& agg, const host::Snapshot& host,
                     GroupBy by);

}  // namespace tally::report
