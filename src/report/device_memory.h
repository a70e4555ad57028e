// A DRM device's memory facts as tally gpu (report/gpu_json.h,
// report/gpu_table.h) and tally doctor both show them; no scan or aggregate,
// so the doctor includes this without the renderers.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "devices/drm_devices.h"
#include "devices/gtt_ceiling.h"

namespace tally::report {

// A device's two GTT ceilings (graphics, compute: each of the compute
// ceiling's caps), the TTM module serving it, and which ceiling headroom uses.
nlohmann::ordered_json gttCeilingsJson(const devices::GttCeilings& c);
// The compute ceiling's caps in words, one line each ("KFD system limit
// 121.4 GiB (MemTotal ...)"), for the table and the doctor.
std::vector<std::string> computeTermLines(const devices::GttCeilings& c);
// Where ROCm's VRAM-flagged memory lives on a device: {"where", "evidence"}.
nlohmann::ordered_json rocmPlacementJson(const devices::RocmPlacement& p);
const char* rocmWhereName(devices::RocmPlacement::Where w);  // "gtt", "vram", "unknown"

// A device's sysfs memory figures: {"gtt": {"total_bytes", "used_bytes", "source"}, ...}.
nlohmann::ordered_json deviceMemoryJson(const devices::DrmDevice& d);

}  // namespace tally::report
