// The effective config as `tally config check` lists it: every setting with
// its default filled in, as JSON (raw units) and as text (human units). Pure.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/config.h"

namespace tally::config {

// `stateDir`: [daemon] state_dir, or the default the daemon would use.
nlohmann::ordered_json effectiveJson(const Config& c, const std::string& stateDir);
std::vector<std::string> effectiveText(const Config& c, const std::string& stateDir);

}  // namespace tally::config
