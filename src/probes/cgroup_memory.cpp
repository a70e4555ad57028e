#include "probes/cgroup_memory.h"

#include "util/text.h"

namespace tally::probes {

std::optional<std::uint64_t> FlatKeyed::get(std::string_view key) const {
  for (const auto& [k, v] : entries) {
    if (k == key) return v;
  }
  return std::nullopt;
}

std::optional<FlatKeyed> parseFlatKeyed(std::string_view text) {
  FlatKeyed out;
  text::LineReader lines(text);
  while (auto raw = lines.next()) {
    std::string_view line = text::trim(*raw);
    if (line.empty()) continue;
    auto sp = line.find(' ');
    if (sp == std::string_view::npos || sp == 0) return std::nullopt;
    std::string_view key = line.substr(0, sp);
    // Kernel keys are identifiers ("oom_kill", "populated"); a control byte
    // or NUL means this is not a counter file.
    for (char c : key) {
      if (c <= ' ' || c > '~') return std::nullopt;
    }
    auto value = text::parseU64(text::trim(line.substr(sp + 1)));
    if (!value) return std::nullopt;
    if (out.get(key)) continue;
    out.entries.emplace_back(std::string(key), *value);
  }
  return out;
}

std::optional<MemoryLimit> parseMemoryLimit(std::string_view text) {
  std::string_view v = text::trim(text);
  if (v == "max") return MemoryLimit{true, 0};
  auto bytes = text::parseU64(v);
  if (!bytes) return std::nullopt;
  return MemoryLimit{false, *bytes};
}

}  // namespace tally::probes
