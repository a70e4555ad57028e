#include "probes/dmem.h"

#include "util/text.h"

namespace tally::probes {

std::optional<std::vector<DmemRegion>> parseDmemCapacity(std::string_view text) {
  std::vector<DmemRegion> out;
  while (!text.empty()) {
    auto nl = text.find('\n');
    std::string_view line = text::trim(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (line.empty()) continue;
    auto sp = line.find_first_of(" \t");
    if (sp == std::string_view::npos) return std::nullopt;
    auto bytes = text::parseU64(text::trim(line.substr(sp)));
    if (!bytes) return std::nullopt;
    out.push_back({std::string(line.substr(0, sp)), *bytes});
  }
  return out;
}

}  // namespace tally::probes
