// The one way a daemon message's fields are read, for requests (the daemon)
// and replies and events (the clients) alike, and a lease's declaration
// wherever it is stored (lease/declaration.h): each field's type, size and
// range is checked, an error names the field ("\"pools\"[2] must be a
// string"), and unknown() refuses what was not read. Here, on the lowest
// floor, so the lease's declaration is read by this one reader too.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "util/result.h"
#include "util/text.h"

namespace tally::jsonfields {

using json = nlohmann::json;

// A field name as an error shows it: a client's key is cut and never trusted.
inline std::string shown(std::string_view key) { return text::truncateUtf8(key, 64); }

// Reads the fields of one params object; remembers which were read so that
// unknown() can refuse the rest.
class Fields {
 public:
  Fields(const json& obj, std::string prefix = {}) : obj_(obj), prefix_(std::move(prefix)) {}

  Error bad(const char* key, std::string_view what) const {
    return Error{0, fmt::format("\"{}{}\" {}", prefix_, key, what)};
  }
  const json* get(const char* key) {
    seen_.insert(key);
    auto it = obj_.find(key);
    if (it == obj_.end() || it->is_null()) return nullptr;
    return &*it;
  }
  Result<std::optional<std::string>> str(const char* key, std::size_t maxBytes) {
    const json* v = get(key);
    if (!v) return std::optional<std::string>();
    if (!v->is_string()) return bad(key, "must be a string");
    const auto& s = v->get_ref<const std::string&>();
    if (s.size() > maxBytes)
      return bad(key, fmt::format("is {} bytes; at most {}", s.size(), maxBytes));
    return std::optional<std::string>(s);
  }
  Result<std::string> required(const char* key, std::size_t maxBytes) {
    auto s = str(key, maxBytes);
    if (!s) return s.error();
    if (!*s || (*s)->empty()) return bad(key, "is required");
    return std::move(**s);
  }
  Result<std::optional<std::uint64_t>> u64(const char* key, std::uint64_t max = UINT64_MAX) {
    const json* v = get(key);
    if (!v) return std::optional<std::uint64_t>();
    std::uint64_t n = 0;
    if (v->is_number_unsigned())
      n = v->get<std::uint64_t>();
    else if (v->is_number_integer() && v->get<std::int64_t>() >= 0)
      n = static_cast<std::uint64_t>(v->get<std::int64_t>());
    else
      return bad(key, "must be a non-negative integer");
    if (n > max) return bad(key, fmt::format("must be at most {}", max));
    return std::optional<std::uint64_t>(n);
  }
  Result<bool> boolean(const char* key) {
    const json* v = get(key);
    if (!v) return false;
    if (!v->is_boolean()) return bad(key, "must be true or false");
    return v->get<bool>();
  }
  Result<std::optional<std::int64_t>> i64(const char* key, std::int64_t lo, std::int64_t hi) {
    const json* v = get(key);
    if (!v) return std::optional<std::int64_t>();
    if (!v->is_number_integer() ||
        (v->is_number_unsigned() && v->get<std::uint64_t>() > static_cast<std::uint64_t>(hi))) {
      return bad(key, fmt::format("must be an integer in {}..{}", lo, hi));
    }
    auto n = v->get<std::int64_t>();
    if (n < lo || n > hi) return bad(key, fmt::format("must be an integer in {}..{}", lo, hi));
    return std::optional<std::int64_t>(n);
  }
  Status unknown() const {
    for (const auto& [k, v] : obj_.items()) {
      if (!seen_.count(k))
        return Error{0, fmt::format("unknown field \"{}{}\"", prefix_, shown(k))};
    }
    return Ok{};
  }

 private:
  const json& obj_;
  std::string prefix_;
  std::set<std::string, std::less<>> seen_;
};

}  // namespace tally::jsonfields
