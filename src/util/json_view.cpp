#include "util/json_view.h"

#include <fmt/format.h>

#include "util/units.h"

namespace tally::jsonview {

std::string bytesOrDash(const nlohmann::json& v) {
  auto n = count(v);
  return n ? units::humanBytes(*n) : std::string("-");
}

std::string spanText(std::uint64_t startNs, std::uint64_t endNs) {
  if (!startNs || endNs < startNs) return "-";
  std::uint64_t s = (endNs - startNs) / 1000000000u;
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  if (s < 86400) return fmt::format("{}h{:02}m", s / 3600, s % 3600 / 60);
  return fmt::format("{}d{:02}h", s / 86400, s % 86400 / 3600);
}

}  // namespace tally::jsonview
