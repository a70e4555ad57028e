#pragma once

#include <cstddef>
#include <string_view>

namespace tally::lease {

// The longest lease id a request or a kept record may carry. The daemon makes
// 12 hex digits (newLeaseId); the room is for ids a later daemon may make.
inline constexpr std::size_t kMaxLeaseId = 64;

// A lease id as the daemon accepts one: 1-64 of [A-Za-z0-9_-]. Never a
// character the RPC's or a record's syntax uses, nor '.' (a unit name's).
constexpr bool validLeaseId(std::string_view id) {
  if (id.empty() || id.size() > kMaxLeaseId) return false;
  for (char c : id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_';
    if (!ok) return false;
  }
  return true;
}

}  // namespace tally::lease
