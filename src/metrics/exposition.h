// The Prometheus text exposition format (version 0.0.4), pure: families in,
// text out. Names carry base units (_bytes, _seconds, _total); label values
// are escaped; a family with no sample is still declared (HELP/TYPE) so a
// dashboard can tell "no lease" from "no tally".
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace tally::metrics {

using Labels = std::vector<std::pair<std::string, std::string>>;

struct Sample {
  Labels labels;
  std::variant<std::uint64_t, double> value;
};

enum class Type { Gauge, Counter };

struct Family {
  std::string name, help;
  Type type = Type::Gauge;
  std::vector<Sample> samples;
};

// A metric or label name: [a-zA-Z_:][a-zA-Z0-9_:]* (labels without ':').
bool validMetricName(const std::string& name);
bool validLabelName(const std::string& name);
std::string escapeLabelValue(const std::string& v);

std::string render(const std::vector<Family>& families);

}  // namespace tally::metrics
