// What `tally top` and `tally seats` draw, pure: the daemon's overview (or
// seat rows) in, lines of at most `width` columns out. The terminal loop
// (cli/cmd_top.cpp) only fetches, calls this, and writes the lines.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tally::views {

// How the lease rows are ordered (htop's keys: m, g, n; l back to the daemon's order).
enum class SortKey { Lease, Memory, Gpu, Name };

struct ViewOptions {
  std::size_t width = 120;
  std::size_t height = 0;  // 0 = as many lines as it takes (the plain listing)
  std::uint64_t refreshMs = 1000;
  std::string status;   // the last fetch error, shown in the header; empty when fine
  bool colour = false;  // a terminal without NO_COLOR: over a limit red, near it yellow, stale dim
  bool daemonGone = false;  // the last fetch failed: every row is stale (shown, never current)
  SortKey sort = SortKey::Lease;
};

// The seat table: one line per lease, a header first. A stale row shows
// "stale" and '-' for every measured figure. The columns fit `width`: lease,
// name, state, memory now/max and GPU now/limit (with %) always; memory
// peak, GTT, VRAM, running and the declared attributes and workload go first
// as the terminal narrows (80 columns keep the essentials, 120 nearly all).
std::vector<std::string> seatTable(const nlohmann::json& seats, const ViewOptions& opts);
std::vector<std::string> seatTable(const nlohmann::json& seats, std::size_t width);

// The whole screen: header (coverage, host headroom, refresh), leases, pools,
// devices and the GPU memory outside leases. With a height, the lease table is cut
// to fit and says how many rows it left out.
std::vector<std::string> render(const nlohmann::json& overview, const ViewOptions& opts);

// Cuts or pads `line` to exactly `width` display columns (ASCII assumed; a
// multi-byte character is never split).
std::string fit(const std::string& line, std::size_t width);

}  // namespace tally::views
