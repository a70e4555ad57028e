// `tally gpu --json`: the JSON document (schema 1).
#pragma once

#include <nlohmann/json.hpp>

#include "gpumem/aggregate.h"
#include "host/snapshot.h"
#include "scanner/scan.h"

namespace tally::report {

using gpumem::Aggregate;

nlohmann::ordered_json gpuJson(const scanner::Scan& scan, const Aggregate& agg,
                               const host::Snapshot& host);

}  // namespace tally::report
