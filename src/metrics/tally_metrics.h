// tally's metrics from the daemon's overview (the JSON the "overview" RPC
// returns: seats, pools, devices, coverage, enforcement counters), pure. The
// daemon renders them for its textfile and GET /metrics; `tally metrics`
// prints the daemon's rendering. A figure the overview lacks (unmeasured,
// stale) gives no sample, never a 0.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "metrics/exposition.h"

namespace tally::metrics {

std::vector<Family> fromOverview(const nlohmann::json& overview);
inline std::string renderOverview(const nlohmann::json& overview) {
  return render(fromOverview(overview));
}

}  // namespace tally::metrics
