// Reading JSON that another part (or an older daemon) produced, without
// trusting its shape: a missing key or a wrong type reads as "absent", never
// as an exception or a 0. Used by the views built on the daemon's overview
// (metrics, tally top) and by the journal entries built from ledger bodies.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace tally::jsonview {

// j[key] when j is an object holding it, else null.
inline const nlohmann::json& get(const nlohmann::json& j, const char* key) {
  static const nlohmann::json kNull;
  return j.is_object() && j.contains(key) ? j[key] : kNull;
}

// A string field, or `dflt`.
inline std::string text(const nlohmann::json& j, const char* key, const char* dflt = "") {
  const nlohmann::json& v = get(j, key);
  return v.is_string() ? v.get<std::string>() : std::string(dflt);
}

// A non-negative integer (bytes, ns, counts), absent for anything else.
inline std::optional<std::uint64_t> count(const nlohmann::json& v) {
  if (v.is_number_unsigned()) return v.get<std::uint64_t>();
  if (v.is_number_integer() && v.get<std::int64_t>() >= 0)
    return static_cast<std::uint64_t>(v.get<std::int64_t>());
  return std::nullopt;
}

// A figure that may be absent, as JSON: the value or null (never 0).
template <class Json = nlohmann::json, class T>
Json orNull(const std::optional<T>& v) {
  return v ? Json(*v) : Json(nullptr);
}

// "12.0 GiB", or "-" for an absent (or non-count) figure: how every table
// shows bytes.
std::string bytesOrDash(const nlohmann::json& v);

// A span of time as tables show it ("45s", "3m05s", "2h10m", "4d03h"), or "-"
// when either end is unknown or the end comes first.
std::string spanText(std::uint64_t startNs, std::uint64_t endNs);

// The strings of an array, comma-separated ("gpu,batch").
inline std::string joined(const nlohmann::json& arr) {
  std::string out;
  if (!arr.is_array()) return out;
  for (const auto& v : arr) {
    if (v.is_string()) out += (out.empty() ? "" : ",") + v.get<std::string>();
  }
  return out;
}

}  // namespace tally::jsonview
