#include "config/diff.h"

#include <fmt/format.h>

#include <string_view>

#include "config/listing.h"
#include "util/units.h"

namespace tally::config {

namespace {

using json = nlohmann::ordered_json;

// The key as the TOML file spells it (the listing's JSON names its units).
std::string tomlKey(std::string_view key) {
  for (std::string_view suffix : {"_us", "_bytes", "_percent"})
    if (key.ends_with(suffix)) return std::string(key.substr(0, key.size() - suffix.size()));
  return std::string(key);
}

bool isBytes(std::string_view key) {
  return key.find("budget") != std::string_view::npos || key.ends_with("_max") ||
         key.ends_with("_high") || key.ends_with("_bytes");
}

// One value as `config check` shows it.
std::string shown(std::string_view key, const json& v) {
  if (v.is_null()) return "none";
  if (v.is_number_unsigned()) {
    auto n = v.get<std::uint64_t>();
    if (key.ends_with("_us")) return units::humanDuration(n);
    if (isBytes(key)) return units::humanBytes(n);
    return std::to_string(n);
  }
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_array()) {
    if (v.empty()) return "[]";
    std::string out;
    for (const auto& e : v) out += (out.empty() ? "" : ", ") + shown(key, e);
    return "[" + out + "]";
  }
  return v.dump();
}

// Each key of one table whose value differs, as "PREFIX.key OLD -> NEW".
void tableChanges(const std::string& prefix, const json& before, const json& after,
                  std::vector<std::string>& out) {
  for (const auto& [key, value] : after.items()) {
    if (key == "name") continue;
    const json old = before.contains(key) ? before.at(key) : json();
    if (old == value) continue;
    out.push_back(
        fmt::format("{}.{} {} -> {}", prefix, tomlKey(key), shown(key, old), shown(key, value)));
  }
}

// Tables matched by name: added, removed, or changed key by key.
void namedChanges(const char* section, const json& before, const json& after,
                  std::vector<std::string>& out) {
  auto find = [](const json& list, const json& name) -> const json* {
    for (const auto& e : list)
      if (e.at("name") == name) return &e;
    return nullptr;
  };
  for (const auto& e : before)
    if (!find(after, e.at("name")))
      out.push_back(fmt::format("{}.{} removed", section, e.at("name").get<std::string>()));
  for (const auto& e : after) {
    std::string name = e.at("name").get<std::string>();
    if (const json* old = find(before, e.at("name")))
      tableChanges(fmt::format("{}.{}", section, name), *old, e, out);
    else
      out.push_back(fmt::format("{}.{} added", section, name));
  }
}

}  // namespace

Changes differences(const Config& before, const Config& after) {
  json a = effectiveJson(before, before.daemon.stateDir);
  json b = effectiveJson(after, after.daemon.stateDir);
  Changes c;
  tableChanges("daemon", a.at("daemon"), b.at("daemon"), c.daemon);
  namedChanges("pools", a.at("pools"), b.at("pools"), c.pools);
  namedChanges("leases", a.at("leases"), b.at("leases"), c.leases);
  return c;
}

}  // namespace tally::config
