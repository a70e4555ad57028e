#include "slurm/gres.h"

#include <fmt/format.h>

#include "util/text.h"

namespace tally::slurm {

Result<std::uint64_t> slurmCount(std::string_view text) {
  std::string_view digits = text;
  std::uint64_t scale = 1;
  if (!text.empty()) {
    int shift = 0;
    switch (text.back()) {
      case 'k':
      case 'K':
        shift = 10;
        break;
      case 'm':
      case 'M':
        shift = 20;
        break;
      case 'g':
      case 'G':
        shift = 30;
        break;
      case 't':
      case 'T':
        shift = 40;
        break;
      case 'p':
      case 'P':
        shift = 50;
        break;
      default:
        break;
    }
    if (shift) {
      digits.remove_suffix(1);
      scale = std::uint64_t{1} << shift;
    }
  }
  auto n = digits.empty() ? std::nullopt : text::parseU64(digits);
  if (!n) {
    return Error{EINVAL, fmt::format("'{}' is not a Slurm count (digits with K, M, G, T or P)",
                                     text::truncateUtf8(text, 64))};
  }
  auto bytes = text::mulU64(*n, scale);
  if (!bytes) return Error{ERANGE, fmt::format("'{}' is more than 2^64 - 1", text)};
  return *bytes;
}

namespace {

// One entry: its "gres:"/"gres/" prefix and "(…)" detail set apart, then the
// count after the name: ":count", ":type:count", "=count" (tres_alloc_str), or
// in the detail, "(CNT:count)" (a count-only GRES in a job's per-node detail).
Result<std::optional<std::uint64_t>> entryCount(std::string_view entry, std::string_view name) {
  std::string_view e = text::trim(entry);
  if (text::startsWith(e, "gres:") || text::startsWith(e, "gres/")) e.remove_prefix(5);
  std::string_view detail;
  if (auto paren = e.find('('); paren != std::string_view::npos) {
    detail = e.substr(paren + 1);
    detail = detail.substr(0, detail.find(')'));
    e = e.substr(0, paren);
  }
  if (!text::startsWith(e, name)) return std::optional<std::uint64_t>{};
  std::string_view rest = e.substr(name.size());
  std::string_view count;
  if (rest.empty()) {
    if (!text::startsWith(detail, "CNT:")) return std::optional<std::uint64_t>{1};  // a bare name
    count = detail.substr(4);
    count = count.substr(0, count.find(','));
  } else if (rest[0] == '=') {
    count = rest.substr(1);
  } else if (rest[0] == ':') {
    count = rest.substr(1);
    if (auto colon = count.rfind(':'); colon != std::string_view::npos)
      count = count.substr(colon + 1);
  } else {
    return std::optional<std::uint64_t>{};  // another GRES whose name starts with ours
  }
  auto n = slurmCount(count);
  if (!n) {
    return Error{n.error().code,
                 fmt::format("GRES entry '{}': {}", text::truncateUtf8(text::trim(entry), 128),
                             n.error().message)};
  }
  return std::optional<std::uint64_t>{*n};
}

}  // namespace

Result<std::optional<std::uint64_t>> gresCount(std::string_view list, std::string_view name) {
  std::optional<std::uint64_t> total;
  while (!list.empty()) {
    std::size_t cut = list.find_first_of(",;");
    std::string_view entry = list.substr(0, cut);
    list = cut == std::string_view::npos ? std::string_view{} : list.substr(cut + 1);
    auto n = entryCount(entry, name);
    if (!n) return n.error();
    if (!*n) continue;
    // The same GRES named twice (several types on one node) adds up.
    auto sum = (total ? *total : 0) + **n;
    if (sum < **n) return Error{ERANGE, fmt::format("GRES {} adds up to more than 2^64 - 1", name)};
    total = sum;
  }
  return total;
}

Result<std::optional<GresFound>> firstGres(std::string_view list,
                                           const std::vector<std::string>& names) {
  for (const auto& name : names) {
    auto n = gresCount(list, name);
    if (!n) return n.error();
    if (*n) return std::optional<GresFound>(GresFound{name, **n});
  }
  return std::optional<GresFound>{};
}

}  // namespace tally::slurm
