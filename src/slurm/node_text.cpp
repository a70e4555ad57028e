#include "slurm/node_text.h"

#include <fmt/format.h>

#include <algorithm>

#include "slurm/gres.h"
#include "util/text.h"

namespace tally::slurm {
namespace {

std::vector<std::string_view> words(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    std::size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

// The value of KEY= among a line's words.
std::optional<std::string_view> field(const std::vector<std::string_view>& ws,
                                      std::string_view key) {
  for (auto w : ws)
    if (w.size() > key.size() && w.substr(0, key.size()) == key && w[key.size()] == '=')
      return w.substr(key.size() + 1);
  return std::nullopt;
}

std::string_view fileName(std::string_view path) {
  auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

}  // namespace

Plugstack parsePlugstack(std::string_view text) {
  Plugstack p;
  text::LineReader lines(text);
  while (auto line = lines.next()) {
    std::string_view l = *line;
    if (auto hash = l.find('#'); hash != std::string_view::npos) l = l.substr(0, hash);
    auto ws = words(l);
    if (ws.size() < 2) continue;
    if (ws[0] == "include") {
      p.includes.emplace_back(ws[1]);
      continue;
    }
    if (ws[0] != "required" && ws[0] != "optional") continue;
    if (!fileName(ws[1]).starts_with("tally_spank") || p.tally) continue;
    PlugstackLine t;
    t.required = ws[0] == "required";
    t.path = std::string(ws[1]);
    for (std::size_t i = 2; i < ws.size(); ++i) t.args.emplace_back(ws[i]);
    p.tally = std::move(t);
  }
  return p;
}

std::optional<std::string> releaseOfSlurmd(std::string_view slurmdV) {
  for (auto w : words(text::trim(slurmdV))) {
    // The version word: digits '.' digits ['.' ...]
    auto dot = w.find('.');
    if (dot == 0 || dot == std::string_view::npos) continue;
    auto second = w.find('.', dot + 1);
    std::string_view major = w.substr(0, dot);
    std::string_view minor = w.substr(
        dot + 1, second == std::string_view::npos ? std::string_view::npos : second - dot - 1);
    auto digits = [](std::string_view s) {
      return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
    };
    if (digits(major) && digits(minor)) return fmt::format("{}.{}", major, minor);
  }
  return std::nullopt;
}

std::string releaseOfNumber(unsigned v) {
  return fmt::format("{}.{:02}", (v >> 16) & 0xffu, (v >> 8) & 0xffu);
}

Result<std::optional<std::uint64_t>> gresOfScontrol(std::string_view text, std::string_view name) {
  text::LineReader lines(text);
  while (auto line = lines.next()) {
    auto list = field(words(*line), "Gres");
    if (!list) continue;
    if (*list == "(null)") return std::optional<std::uint64_t>{};
    auto n = gresCount(*list, name);
    if (!n)
      return Error{n.error().code, fmt::format("scontrol: Gres={}: {}",
                                               text::truncateUtf8(*list, 128), n.error().message)};
    return *n;
  }
  return Error{ENOENT, "scontrol names no Gres for the node"};
}

namespace {

// A decimal count in `scontrol show node NAME -o`'s KEY=<digits> (at most
// `maxDigits`, so it never overflows); `what` names its unit in the error.
Result<std::uint64_t> countOfScontrol(std::string_view text, std::string_view key,
                                      std::size_t maxDigits, std::string_view what) {
  text::LineReader lines(text);
  while (auto line = lines.next()) {
    auto value = field(words(*line), key);
    if (!value) continue;
    auto n = value->size() <= maxDigits ? text::parseU64(*value) : std::nullopt;
    if (!n)
      return Error{EINVAL, fmt::format("scontrol: {}={} is not a count of {}", key,
                                       text::truncateUtf8(*value, 32), what)};
    return *n;
  }
  return Error{ENOENT, fmt::format("scontrol names no {} for the node", key)};
}

}  // namespace

Result<std::uint64_t> realMemoryOfScontrol(std::string_view text) {
  auto mib = countOfScontrol(text, "RealMemory", 12, "MiB");
  if (!mib) return mib.error();
  return *mib << 20;
}

Result<std::uint64_t> cpusOfScontrol(std::string_view text) {
  return countOfScontrol(text, "CPUTot", 9, "CPUs");
}

Result<bool> containOfScontrolConfig(std::string_view text) {
  text::LineReader lines(text);
  while (auto line = lines.next()) {
    std::string_view l = text::trim(*line);
    if (!text::startsWith(l, "PrologFlags")) continue;
    auto eq = l.find('=');
    if (eq == std::string_view::npos || text::trim(l.substr(0, eq)) != "PrologFlags") continue;
    std::string_view flags = text::trim(l.substr(eq + 1));
    for (std::size_t at = 0; at <= flags.size();) {
      std::size_t comma = std::min(flags.find(',', at), flags.size());
      if (text::trim(flags.substr(at, comma - at)) == "Contain") return true;
      at = comma + 1;
    }
    return false;
  }
  return Error{ENOENT, "scontrol show config names no PrologFlags"};
}

bool pamAdoptsIntoJobs(std::string_view pamText) {
  text::LineReader lines(pamText);
  while (auto line = lines.next()) {
    std::string_view l = text::trim(*line);
    if (l.empty() || l[0] == '#') continue;
    if (l.find("pam_slurm_adopt") != std::string_view::npos) return true;
  }
  return false;
}

}  // namespace tally::slurm
