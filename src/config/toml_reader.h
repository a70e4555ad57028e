// The config's TOML reader, shared by the files that read its tables
// (config.cpp: pools and declared leases; daemon_table.cpp: [daemon]):
// typed reads that record every problem with its line. Internal to config/.
#pragma once

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "util/text.h"
#include "util/units.h"

namespace tally::config::detail {

inline std::size_t lineOf(const toml::node& n) { return n.source().begin.line; }

// Only a TOML integer is a number here. toml++'s value<int64_t>() also converts
// a float, and for one outside int64's range its cast is undefined behaviour
// (found by fuzz_config: memory_budget = 68.19476e67); a float is refused by
// the caller's type message instead.
inline std::optional<std::int64_t> integerOf(const toml::node& n) {
  if (const auto* i = n.as_integer()) return i->get();
  return std::nullopt;
}

class Reader {
 public:
  std::vector<Problem> problems;

  void problem(const toml::node& n, std::string message) {
    problems.push_back({lineOf(n), std::move(message)});
  }

  // Keys a table may hold; anything else is an error naming the known ones.
  void onlyKeys(const toml::table& t, std::string_view where,
                std::initializer_list<std::string_view> known) {
    for (const auto& [key, node] : t) {
      if (std::find(known.begin(), known.end(), key.str()) != known.end()) continue;
      std::string list;
      for (auto k : known) list += fmt::format("{}{}", list.empty() ? "" : ", ", k);
      // A misspelt budget must be found at a glance, not in a list of twenty.
      auto guess = text::nearest(key.str(), std::vector<std::string_view>(known));
      problems.push_back(
          {key.source().begin.line ? key.source().begin.line : lineOf(node),
           guess ? fmt::format("unknown key '{}' in {}: did you mean '{}'? (known: {})", key.str(),
                               where, *guess, list)
                 : fmt::format("unknown key '{}' in {} (known: {})", key.str(), where, list)});
    }
  }

  std::optional<std::string> string(const toml::table& t, std::string_view key,
                                    std::string_view where) {
    const toml::node* n = t.get(key);
    if (!n) return std::nullopt;
    if (auto s = n->value<std::string>()) return *s;
    problem(*n, fmt::format("{}.{} must be a string", where, key));
    return std::nullopt;
  }

  std::optional<bool> boolean(const toml::table& t, std::string_view key, std::string_view where) {
    const toml::node* n = t.get(key);
    if (!n) return std::nullopt;
    if (auto b = n->value<bool>()) return *b;
    problem(*n, fmt::format("{}.{} must be true or false", where, key));
    return std::nullopt;
  }

  // A size: an integer (bytes) or a string with a unit ("96GiB").
  static constexpr std::uint64_t kMinBareSize = 1ULL << 20;
  std::optional<std::uint64_t> size(const toml::table& t, std::string_view key,
                                    std::string_view where) {
    const toml::node* n = t.get(key);
    if (!n) return std::nullopt;
    if (auto i = integerOf(*n)) {
      // A bare number is bytes; one below a MiB is a unit left out ("96"
      // meant 96 GiB), never a size a workload fits in: refused with the fix.
      if (*i >= static_cast<std::int64_t>(kMinBareSize)) return static_cast<std::uint64_t>(*i);
      if (*i > 0) {
        problem(*n, fmt::format("{}.{} = {} is {} bytes, too small to be meant: a bare number is "
                                "bytes. Write a size string, e.g. \"{}GiB\"",
                                where, key, *i, *i, *i));
        return std::nullopt;
      }
      problem(*n, fmt::format("{}.{} must be positive", where, key));
      return std::nullopt;
    }
    if (auto s = n->value<std::string>()) {
      auto v = units::parseSize(*s);
      if (v && *v > 0) return *v;
      problem(*n, fmt::format("{}.{}: {}", where, key, v ? "must be positive" : v.error().message));
      return std::nullopt;
    }
    problem(*n, fmt::format("{}.{} must be bytes (integer) or a size string such as \"96GiB\"",
                            where, key));
    return std::nullopt;
  }

  // A duration: a string with a unit ("1s", "10m") or an integer of seconds.
  std::optional<std::uint64_t> duration(const toml::table& t, std::string_view key,
                                        std::string_view where) {
    const toml::node* n = t.get(key);
    if (!n) return std::nullopt;
    if (auto i = integerOf(*n)) {
      if (*i >= 0 && *i <= 315'360'000) return static_cast<std::uint64_t>(*i) * 1'000'000;
      problem(*n, fmt::format("{}.{} must be 0..315360000 seconds", where, key));
      return std::nullopt;
    }
    if (auto s = n->value<std::string>()) {
      auto v = units::parseDurationUs(*s);
      if (v) return *v;
      problem(*n, fmt::format("{}.{}: {}", where, key, v.error().message));
      return std::nullopt;
    }
    problem(*n, fmt::format("{}.{} must be a duration such as \"1s\" or \"10m\"", where, key));
    return std::nullopt;
  }

  std::optional<std::uint64_t> count(const toml::table& t, std::string_view key,
                                     std::string_view where, std::uint64_t min, std::uint64_t max) {
    const toml::node* n = t.get(key);
    if (!n) return std::nullopt;
    auto i = integerOf(*n);
    if (i && *i >= 0 && static_cast<std::uint64_t>(*i) >= min &&
        static_cast<std::uint64_t>(*i) <= max) {
      return static_cast<std::uint64_t>(*i);
    }
    problem(*n, fmt::format("{}.{} must be an integer in {}..{}", where, key, min, max));
    return std::nullopt;
  }
};

// A list of user or group names (or numeric ids), form only (config.cpp).
void readNames(Reader& r, const toml::table& t, const char* key, const std::string& where,
               std::vector<std::string>& out);

// The [daemon] table (daemon_table.cpp).
void readDaemon(Reader& r, const toml::table& t, Daemon& d);

}  // namespace tally::config::detail
