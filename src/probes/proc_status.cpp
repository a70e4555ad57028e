#include "probes/proc_status.h"

#include <limits>

#include "util/text.h"

namespace tally::probes {
namespace {

// Split a value on blanks into at most `max` numbers; false on any junk.
bool numbers(std::string_view v, std::vector<std::uint64_t>& out, std::size_t max) {
  out.clear();
  while (true) {
    v = text::trimLeft(v);
    if (v.empty()) return !out.empty();
    std::size_t end = 0;
    while (end < v.size() && !text::isSpace(v[end])) ++end;
    auto n = text::parseU64(v.substr(0, end));
    if (!n || out.size() == max) return false;
    out.push_back(*n);
    v.remove_prefix(end);
  }
}

}  // namespace

ProcStatus parseProcStatus(std::string_view input) {
  ProcStatus out;
  text::LineReader lines(input);
  std::vector<std::uint64_t> nums;
  while (auto l = lines.next()) {
    auto colon = l->find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view key = l->substr(0, colon);
    std::string_view value = l->substr(colon + 1);
    if (key == "Name" && !out.name) {
      // The kernel writes Name:\t<comm>; comm itself may hold blanks.
      if (!value.empty() && value.front() == '\t') value.remove_prefix(1);
      while (!value.empty() && (value.back() == '\r')) value.remove_suffix(1);
      if (value.find('\0') == std::string_view::npos) out.name = std::string(value);
    } else if (key == "Uid" && !out.uidReal) {
      if (numbers(value, nums, 4) && nums.size() == 4) {
        constexpr auto kMax = std::numeric_limits<std::uint32_t>::max();
        bool fits = true;
        for (auto n : nums) fits = fits && n <= kMax;
        if (fits) {
          out.uidReal = static_cast<std::uint32_t>(nums[0]);
          out.uidEffective = static_cast<std::uint32_t>(nums[1]);
          out.uidSaved = static_cast<std::uint32_t>(nums[2]);
          out.uidFs = static_cast<std::uint32_t>(nums[3]);
        }
      }
    } else if (key == "NSpid" && out.nspid.empty()) {
      // PID namespaces nest at most 32 deep (MAX_PID_NS_LEVEL).
      if (numbers(value, nums, 33)) out.nspid = nums;
    }
  }
  return out;
}

}  // namespace tally::probes
