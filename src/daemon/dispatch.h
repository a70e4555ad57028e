// One request line from a client, start to finish: the frame, the envelope,
// the typed decoder and the service, behind one exception boundary. The
// server calls it for every line it reads; the request-path fuzzer
// (fuzz/request_fuzz.cpp) calls the very same function.
//
// Anything thrown while one request is handled is a bug, but it is that
// request's bug: the request is answered "internal", the bug is logged once
// with the method and the peer, and the daemon goes on serving everyone else.
#pragma once

#include <cstdint>
#include <string>

#include "daemon/seams.h"
#include "daemon/service.h"
#include "rpc/protocol.h"

namespace tally::daemon {

class Dispatcher {
 public:
  Dispatcher(Service& service, Outbox& outbox) : service_(service), outbox_(outbox) {}
  void line(std::uint64_t conn, const Peer& peer, const rpc::LineReader::Line& line);
  // Requests answered "internal" since start (0 in a correct daemon; the
  // fuzzer aborts on the first).
  std::uint64_t internalErrors() const { return internalErrors_; }
  const std::string& lastInternalError() const { return lastInternalError_; }

 private:
  Service& service_;
  Outbox& outbox_;
  std::uint64_t internalErrors_ = 0;
  std::string lastInternalError_;
};

}  // namespace tally::daemon
