// `tally gpu` output: the JSON document (schema 1) and the human table.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "devices/drm_devices.h"
#include "probes/meminfo.h"
#include "report/aggregate.h"
#include "scanner/scan.h"

namespace tally::report {

enum class GroupBy { kProcess, kCgroup, kContainer };

nlohmann::ordered_json gpuJson(const scanner::Scan& scan, const Aggregate& agg,
                               const HostFacts& host);
std::string gpuTable(const scanner::Scan& scan, const Aggregate& agg, const HostFacts& host,
                     GroupBy by);

// A device's two GTT ceilings (graphics, compute), the TTM module serving it,
// and which ceiling headroom uses.
nlohmann::ordered_json gttCeilingsJson(const devices::GttCeilings& c);

// A device's sysfs memory figures: {"gtt": {"total_bytes", "used_bytes", "source"}, ...}.
nlohmann::ordered_json deviceMemoryJson(const devices::DrmDevice& d);

// 1536 -> "1.5 KiB"; exact bytes below 1 KiB.

}  // namespace tally::report
