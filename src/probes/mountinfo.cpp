#include "probes/mountinfo.h"

#include "util/text.h"

namespace tally::probes {
namespace {

std::string unescape(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    auto oct = [](char c) { return c >= '0' && c <= '3'; };
    auto oct7 = [](char c) { return c >= '0' && c <= '7'; };
    // The kernel escapes blank, tab, newline and backslash as \ooo (< \400).
    if (s[i] == '\\' && i + 3 < s.size() && oct(s[i + 1]) && oct7(s[i + 2]) && oct7(s[i + 3])) {
      out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
      i += 3;
      continue;
    }
    out += s[i];
  }
  return out;
}

std::vector<std::string_view> fields(std::string_view line) {
  std::vector<std::string_view> out;
  while (true) {
    line = text::trimLeft(line);
    if (line.empty()) return out;
    std::size_t end = 0;
    while (end < line.size() && line[end] != ' ') ++end;
    out.push_back(line.substr(0, end));
    line.remove_prefix(end);
  }
}

}  // namespace

std::vector<Mount> parseMountinfo(std::string_view input) {
  std::vector<Mount> out;
  text::LineReader lines(input);
  while (auto l = lines.next()) {
    auto f = fields(*l);
    // id parent maj:min root mountpoint options [optional...] - fstype source superopts
    std::size_t dash = 6;
    while (dash < f.size() && f[dash] != "-") ++dash;
    if (f.size() < 5 || dash + 1 >= f.size()) continue;
    Mount m;
    m.mountPoint = unescape(f[4]);
    m.fsType = std::string(f[dash + 1]);
    if (dash + 3 < f.size()) m.superOptions = std::string(f[dash + 3]);
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace tally::probes
