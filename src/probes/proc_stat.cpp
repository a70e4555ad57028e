#include "probes/proc_stat.h"

#include "util/text.h"

namespace tally::probes {

std::optional<ProcStat> parseProcStat(std::string_view input) {
  auto close = input.rfind(')');
  if (close == std::string_view::npos || input.find('(') > close) return std::nullopt;
  std::string_view rest = input.substr(close + 1);
  // Fields after comm: index 0 is field 3 (state) ... index 19 is field 22 (starttime).
  ProcStat out;
  for (int index = 0; index <= 19; ++index) {
    rest = text::trimLeft(rest);
    std::size_t end = 0;
    while (end < rest.size() && !text::isSpace(rest[end])) ++end;
    if (end == 0) return std::nullopt;
    std::string_view field = rest.substr(0, end);
    if (index == 0) {
      if (field.size() != 1) return std::nullopt;
      out.state = field[0];
    } else if (index == 19) {
      auto t = text::parseU64(field);
      if (!t) return std::nullopt;
      out.startTimeTicks = *t;
    }
    rest.remove_prefix(end);
  }
  return out;
}

}  // namespace tally::probes
