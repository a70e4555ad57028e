#pragma once

#include <cstddef>
#include <string_view>

namespace tally::lease {

// A pool's name: 1-64 of [A-Za-z0-9_-], wherever one is named (the config's
// [pools.<name>], a request's "pools", the Slurm plugin's --tally-pool). It
// lives here, below the config and the RPC, because both judge one.
inline constexpr std::size_t kMaxPoolName = 64;
constexpr bool validPoolName(std::string_view name) {
  if (name.empty() || name.size() > kMaxPoolName) return false;
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
          c == '_'))
      return false;
  }
  return true;
}

}  // namespace tally::lease
