#include "cli/user_names.h"

#include <fmt/format.h>
#include <pwd.h>

#include <vector>

#include "daemon/pool_access.h"

namespace tally::cli {

const std::string& UserNames::of(std::uint32_t uid) {
  auto it = cache_.find(uid);
  if (it != cache_.end()) return it->second;
  std::vector<char> buf(16384);
  passwd pw{}, *found = nullptr;
  std::string name = ::getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found
                         ? std::string(found->pw_name)
                         : std::to_string(uid);
  return cache_.emplace(uid, std::move(name)).first->second;
}

void UserNames::annotate(nlohmann::json& rows) {
  if (!rows.is_array()) return;
  for (auto& row : rows)
    if (auto uid = ownerOf(row)) row["user"] = of(*uid);
}

Result<std::uint32_t> userArgument(const std::string& text) {
  if (auto uid = daemon::systemLookup().user(text); uid && *uid <= UINT32_MAX)
    return static_cast<std::uint32_t>(*uid);
  return Error{ENOENT, fmt::format("--user {}: no such user on this host; give a login name or a "
                                   "numeric uid",
                                   text.substr(0, 64))};
}

bool userOption(const char* command, const std::string& text, std::optional<std::uint32_t>& out) {
  if (text.empty()) return true;
  auto uid = userArgument(text);
  if (!uid) {
    fmt::print(stderr, "tally {}: {}\n", command, uid.error().message);
    return false;
  }
  out = *uid;
  return true;
}

std::optional<std::uint32_t> ownerOf(const nlohmann::json& row) {
  if (!row.is_object()) return std::nullopt;
  auto it = row.find("owner_uid");
  if (it == row.end() || !it->is_number_unsigned() || it->get<std::uint64_t>() > UINT32_MAX)
    return std::nullopt;
  return static_cast<std::uint32_t>(it->get<std::uint64_t>());
}

}  // namespace tally::cli
