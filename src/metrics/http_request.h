// The head of an HTTP/1.x request, as GET /metrics needs it. Pure: bytes in,
// a verdict out, so hostile clients are tested and fuzzed directly. Only the
// request line is interpreted; header lines are bounded and skipped.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tally::metrics {

// A request head larger than this is refused (431); real scrapers send < 1 KiB.
inline constexpr std::size_t kMaxHttpHeadBytes = 8192;

struct HttpHead {
  enum class State { NeedMore, Complete, Bad };
  State state = State::NeedMore;
  std::string method;  // Complete: "GET", "HEAD", ...
  std::string target;  // Complete: "/metrics", path only (a query is dropped)
  int status = 0;      // Bad: the status to answer (400, 431, 505)
  std::string reason;  // Bad: why, for the body
};

// Reads what has arrived so far (the whole buffer each time).
HttpHead parseHttpHead(std::string_view bytes);

}  // namespace tally::metrics
