#include "metrics/http_request.h"

namespace tally::metrics {
namespace {

HttpHead bad(int status, std::string reason) {
  HttpHead h;
  h.state = HttpHead::State::Bad;
  h.status = status;
  h.reason = std::move(reason);
  return h;
}

bool isToken(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

}  // namespace

HttpHead parseHttpHead(std::string_view bytes) {
  // The head ends at the first empty line (CRLF CRLF, or bare LF LF).
  std::size_t end = bytes.find("\r\n\r\n");
  std::size_t endLf = bytes.find("\n\n");
  if (endLf != std::string_view::npos && (end == std::string_view::npos || endLf < end))
    end = endLf;
  if (end == std::string_view::npos) {
    if (bytes.size() > kMaxHttpHeadBytes) return bad(431, "request head too large");
    // The request line alone can be judged before the head is complete.
    auto nl = bytes.find('\n');
    if (nl == std::string_view::npos) {
      if (bytes.size() > 1024) return bad(400, "request line too long");
      return {};
    }
  } else if (end > kMaxHttpHeadBytes) {
    return bad(431, "request head too large");
  }
  std::string_view line = bytes.substr(0, bytes.find('\n'));
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.size() > 1024) return bad(400, "request line too long");
  auto sp1 = line.find(' ');
  if (sp1 == std::string_view::npos || sp1 == 0 || sp1 > 16)
    return bad(400, "malformed request line");
  std::string_view method = line.substr(0, sp1);
  for (char c : method) {
    if (!isToken(c)) return bad(400, "malformed method");
  }
  auto sp2 = line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos) return bad(400, "malformed request line");
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string_view version = line.substr(sp2 + 1);
  if (target.empty() || target[0] != '/') return bad(400, "the target must be a path");
  for (char c : target) {
    auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f) return bad(400, "malformed target");
  }
  if (version != "HTTP/1.1" && version != "HTTP/1.0")
    return bad(505, "only HTTP/1.0 and HTTP/1.1 are spoken here");
  if (end == std::string_view::npos) return {};  // a good start; the headers are still arriving
  HttpHead h;
  h.state = HttpHead::State::Complete;
  h.method = std::string(method);
  h.target = std::string(target.substr(0, target.find('?')));
  return h;
}

}  // namespace tally::metrics
