#include "probes/proc_cgroup.h"

#include "util/text.h"

namespace tally::probes {

std::optional<ProcCgroup> parseProcCgroup(std::string_view input) {
  text::LineReader lines(input);
  while (auto l = lines.next()) {
    std::string_view line = *l;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.substr(0, 3) != "0::") continue;
    std::string_view path = line.substr(3);  // paths may contain ':' and blanks
    if (path.empty() || path.front() != '/') return std::nullopt;
    if (path.find('\0') != std::string_view::npos) return std::nullopt;
    ProcCgroup out;
    constexpr std::string_view kDeleted = " (deleted)";
    if (path.size() > kDeleted.size() && path.substr(path.size() - kDeleted.size()) == kDeleted) {
      out.deleted = true;
      path.remove_suffix(kDeleted.size());
    }
    out.outsideNamespace = path == "/.." || path.substr(0, 4) == "/../";
    out.path = std::string(path);
    return out;
  }
  return std::nullopt;
}

std::vector<CgroupController> parseProcCgroups(std::string_view input) {
  std::vector<CgroupController> out;
  text::LineReader lines(input);
  while (auto l = lines.next()) {
    std::string_view line = text::trim(*l);
    if (line.empty() || line.front() == '#') continue;
    std::string_view fields[4];
    std::size_t n = 0;
    while (!line.empty() && n < 4) {
      auto end = line.find_first_of(" \t");
      fields[n++] = line.substr(0, end);
      line = end == std::string_view::npos ? std::string_view{} : text::trimLeft(line.substr(end));
    }
    if (n != 4 || !line.empty()) continue;
    auto hierarchy = text::parseU64(fields[1]);
    auto num = text::parseU64(fields[2]);
    auto enabled = text::parseU64(fields[3]);
    if (!hierarchy || !num || !enabled || *enabled > 1 || fields[0].size() > 64) continue;
    out.push_back({std::string(fields[0]), *hierarchy, *num, *enabled == 1});
  }
  return out;
}

}  // namespace tally::probes
