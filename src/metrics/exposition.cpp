#include "metrics/exposition.h"

#include <fmt/format.h>

#include "util/clean_text.h"

namespace tally::metrics {
namespace {

bool nameChar(char c, bool first, bool colon) {
  bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':');
  return alpha || (!first && c >= '0' && c <= '9');
}

bool validName(const std::string& n, bool colon) {
  if (n.empty()) return false;
  for (std::size_t i = 0; i < n.size(); ++i) {
    if (!nameChar(n[i], i == 0, colon)) return false;
  }
  return true;
}

std::string escapeHelp(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

}  // namespace

bool validMetricName(const std::string& name) { return validName(name, true); }
bool validLabelName(const std::string& name) {
  return validName(name, false) && name.rfind("__", 0) != 0;
}

std::string escapeLabelValue(const std::string& raw) {
  // Prometheus refuses the whole exposition over one byte that is not UTF-8
  // (a cgroup name is any bytes): printable first, then the format's escapes.
  const std::string v = text::printable(raw);
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string render(const std::vector<Family>& families) {
  std::string out;
  for (const auto& f : families) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", f.name, escapeHelp(f.help), f.name,
                       f.type == Type::Counter ? "counter" : "gauge");
    for (const auto& s : f.samples) {
      out += f.name;
      if (!s.labels.empty()) {
        out += '{';
        for (std::size_t i = 0; i < s.labels.size(); ++i) {
          out += fmt::format("{}{}=\"{}\"", i ? "," : "", s.labels[i].first,
                             escapeLabelValue(s.labels[i].second));
        }
        out += '}';
      }
      if (const auto* u = std::get_if<std::uint64_t>(&s.value))
        out += fmt::format(" {}\n", *u);
      else
        out += fmt::format(" {}\n", std::get<double>(s.value));
    }
  }
  return out;
}

}  // namespace tally::metrics
