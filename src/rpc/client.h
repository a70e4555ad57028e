// A blocking client of the daemon's socket, for the CLI: one connection,
// requests with increasing ids, events delivered to a callback while the
// reply is awaited.
#pragma once

#include <functional>
#include <string>

#include "rpc/lease_api.h"
#include "rpc/protocol.h"
#include "util/unique_fd.h"

namespace tally::rpc {

struct WaitedCall;

class Client {
 public:
  static Result<Client> connect(const std::string& path);
  Client(Client&&) = default;
  Client& operator=(Client&&) = default;

  using EventFn = std::function<void(const Message&)>;
  // Sends one request, its params typed (rpc/lease_api.h: each carries its
  // method), and waits for its reply; events for it go to onEvent.
  // `extraFd` (e.g. a signalfd) becoming readable ends the wait early with
  // an error of code EINTR. timeoutMs bounds the wait for the daemon's first
  // word on this request (its reply, or an event such as "queued"): once it
  // has answered, a queued request waits for its grant without that bound (the
  // queue has its own timeout). timeoutMs < 0 waits forever. A timeout is
  // ETIMEDOUT: "the daemon at PATH did not answer in 10s".
  template <class Params>
  Result<Message> call(const Params& params, const EventFn& onEvent = {}, int timeoutMs = -1,
                       int extraFd = -1) {
    return send(api::methodName(Params::kMethod), api::encode(params), onEvent, timeoutMs, extraFd);
  }
  // The next message the daemon sends (a reply or an event), e.g. the
  // events after "subscribe". ETIMEDOUT after timeoutMs; EINTR when extraFd
  // becomes readable.
  Result<Message> next(int timeoutMs = -1, int extraFd = -1);
  const std::string& path() const { return path_; }
  int fd() const { return fd_.get(); }

 private:
  Client(UniqueFd fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)) {}
  friend Result<WaitedCall> sendWaiting(const std::string&, const char*, const json&,
                                        const EventFn&, int, std::uint64_t, int,
                                        const std::function<void(const std::string&)>&);
  Result<Message> send(const std::string& method, const json& params, const EventFn& onEvent,
                       int timeoutMs, int extraFd);
  UniqueFd fd_;
  std::string path_;
  LineReader reader_{16u << 20};
  std::uint64_t nextId_ = 1;
};

// A request that may wait in the daemon's queue (acquire, attach): sent, and
// when the daemon goes away after saying "queued" (a restart loses its queue),
// sent again on a new connection once it is back, every 500 ms for up to
// `reconnectUs`. `say` tells the operator what happens. The daemon cannot tell
// a re-sent request from a new one after a restart: it joins the queue's end.
// EINTR when `signalFd` becomes readable.
struct WaitedCall {
  Client client;  // the connection the answer came on (a run lease keeps it)
  Message reply;
};
Result<WaitedCall> sendWaiting(const std::string& path, const char* method, const json& params,
                               const Client::EventFn& onEvent, int firstAnswerMs,
                               std::uint64_t reconnectUs, int signalFd,
                               const std::function<void(const std::string&)>& say);
template <class Params>
Result<WaitedCall> callWaiting(const std::string& path, const Params& params,
                               const Client::EventFn& onEvent, int firstAnswerMs,
                               std::uint64_t reconnectUs, int signalFd,
                               const std::function<void(const std::string&)>& say) {
  return sendWaiting(path, api::methodName(Params::kMethod), api::encode(params), onEvent,
                     firstAnswerMs, reconnectUs, signalFd, say);
}

}  // namespace tally::rpc
