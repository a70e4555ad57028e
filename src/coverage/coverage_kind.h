// The two answers to "what does this kernel's memcg charge?" and their names on
// the wire. A header of its own because the RPC client decodes the name without
// the probe and its kernel files (coverage.h) coming along.
#pragma once

namespace tally::coverage {

enum class Coverage { HostOnly, HostAndGtt };

constexpr const char* coverageName(Coverage c) {
  return c == Coverage::HostAndGtt ? "host+gtt" : "host";
}

}  // namespace tally::coverage
