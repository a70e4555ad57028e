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

}  // namespace tally::probes
