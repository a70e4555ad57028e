#include "daemon/dispatch.h"

#include <fmt/format.h>
#include <syslog.h>

#include <exception>

#include "util/text.h"

namespace tally::daemon {

void Dispatcher::line(std::uint64_t conn, const Peer& peer, const rpc::LineReader::Line& line) {
  if (line.overflow) {
    outbox_.send(
        conn, rpc::encodeError(nullptr, {rpc::code::kTooLarge,
                                         fmt::format("request longer than {} bytes; it was skipped",
                                                     rpc::kMaxRequestBytes)}));
    return;
  }
  auto parsed = rpc::parseRequest(line.text);
  if (!parsed.request) {
    outbox_.send(conn, rpc::encodeError(parsed.id, parsed.error));
    return;
  }
  const rpc::Request& req = *parsed.request;
  std::string what;
  try {
    service_.handle(conn, peer, req);
    return;
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
    what = "an exception of unknown type";
  }
  ++internalErrors_;
  lastInternalError_ = fmt::format("{}: {}", text::truncateUtf8(req.method, 64), what);
  service_.note(LOG_ERR, fmt::format("internal error while handling '{}' from uid {} (pid {}): {}; "
                                     "the request was answered 'internal' and the daemon goes on "
                                     "(please report this)",
                                     text::truncateUtf8(req.method, 64), peer.uid, peer.pid, what));
  outbox_.send(
      conn, rpc::encodeError(
                req.id,
                {rpc::code::kInternal,
                 "the daemon failed on this request (a bug, logged); nothing else was affected"}));
}

}  // namespace tally::daemon
