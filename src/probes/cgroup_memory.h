// Parsers for the cgroup v2 memory files a lease is verified and metered with:
// flat-keyed files (memory.events, memory.stat, cgroup.events) and limits
// (memory.max, memory.high, memory.swap.max: a byte count or "max").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tally::probes {

// "key value\n" lines, in file order. A malformed line (no value, a value that
// is not a u64, an empty key) makes the whole file nullopt: a half-read
// counter file must not pass for a complete one. A repeated key keeps its
// first value (the kernel never repeats one).
struct FlatKeyed {
  std::vector<std::pair<std::string, std::uint64_t>> entries;
  std::optional<std::uint64_t> get(std::string_view key) const;
};
std::optional<FlatKeyed> parseFlatKeyed(std::string_view text);

// A memory limit as read back: a byte count, or unlimited ("max").
struct MemoryLimit {
  bool unlimited = false;
  std::uint64_t bytes = 0;  // meaningful when !unlimited
  bool operator==(const MemoryLimit&) const = default;
};
std::optional<MemoryLimit> parseMemoryLimit(std::string_view text);

}  // namespace tally::probes
