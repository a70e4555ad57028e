#include "rpc/client.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>

#include "rpc/socket_access.h"
#include "util/clock.h"
#include "util/units.h"

namespace tally::rpc {

Result<Client> Client::connect(const std::string& path) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return errnoError(errno, "socket(AF_UNIX)");
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path)
    return Error{EINVAL, fmt::format("socket path {} is too long", path)};
  std::memcpy(addr.sun_path, path.c_str(), path.size());
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    int e = errno;
    std::string hint =
        e == ENOENT || e == ECONNREFUSED
            ? "; is the daemon running? (systemctl start tally, or tally daemon --config FILE)"
        : e == EACCES ? socketAccessHint(socketAccessFacts(path))
                      : "";
    return Error{
        e, fmt::format("cannot reach the tally daemon at {}: {}{}", path, std::strerror(e), hint)};
  }
  return Client(std::move(fd), path);
}

Result<Message> Client::send(const std::string& method, const json& params, const EventFn& onEvent,
                             int timeoutMs, int extraFd) {
  std::uint64_t id = nextId_++;
  std::string line = encodeRequest(id, method, params);
  std::size_t off = 0;
  while (off < line.size()) {
    ssize_t n = ::send(fd_.get(), line.data() + off, line.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return errnoError(errno, fmt::format("send to the tally daemon at {}", path_));
    off += static_cast<std::size_t>(n);
  }
  std::uint64_t deadline =
      timeoutMs >= 0 ? clock::monotonicUs() + static_cast<std::uint64_t>(timeoutMs) * 1000 : 0;
  for (;;) {
    int wait = -1;
    if (deadline) {
      std::uint64_t now = clock::monotonicUs();
      if (now >= deadline)
        return Error{ETIMEDOUT,
                     fmt::format("the daemon at {} did not answer in {} (request '{}')", path_,
                                 units::humanDuration(static_cast<std::uint64_t>(timeoutMs) * 1000),
                                 method)};
      wait = static_cast<int>((deadline - now) / 1000 + 1);
    }
    auto m = next(wait, extraFd);
    if (!m) {
      if (m.error().code == ETIMEDOUT) continue;  // the deadline check above names the method
      return m.error();
    }
    if (m->event) {
      if (m->id == json(id)) {
        deadline = 0;  // answered: what follows is the queue's wait
        if (onEvent) onEvent(*m);
      }
      continue;
    }
    if (m->id == json(id)) return m;
    if (!m->ok && m->id.is_null())
      return m;  // a connection-level error (too many connections, ...)
  }
}

Result<Message> Client::next(int timeoutMs, int extraFd) {
  std::uint64_t deadline =
      timeoutMs >= 0 ? clock::monotonicUs() + static_cast<std::uint64_t>(timeoutMs) * 1000 : 0;
  for (;;) {
    if (auto l = reader_.next()) {
      if (l->overflow) return Error{EPROTO, "the daemon sent an oversized line"};
      return parseMessage(l->text);
    }
    int wait = -1;
    if (deadline) {
      std::uint64_t now = clock::monotonicUs();
      if (now >= deadline) return Error{ETIMEDOUT, "no message from the tally daemon in time"};
      wait = static_cast<int>((deadline - now) / 1000 + 1);
    }
    pollfd fds[2] = {{fd_.get(), POLLIN, 0}, {extraFd, POLLIN, 0}};
    int n = ::poll(fds, extraFd >= 0 ? 2 : 1, wait);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errnoError(errno, "poll");
    if (extraFd >= 0 && (fds[1].revents & POLLIN)) return Error{EINTR, "interrupted"};
    if (n == 0) continue;
    char buf[65536];
    ssize_t got = ::recv(fd_.get(), buf, sizeof buf, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0)
      return Error{ECONNRESET, fmt::format("the tally daemon at {} closed the connection", path_)};
    reader_.feed(std::string_view(buf, static_cast<std::size_t>(got)));
  }
}

Result<WaitedCall> sendWaiting(const std::string& path, const char* method, const json& params,
                               const Client::EventFn& onEvent, int firstAnswerMs,
                               std::uint64_t reconnectUs, int signalFd,
                               const std::function<void(const std::string&)>& say) {
  bool queued = false;
  std::uint64_t deadline = 0;  // set when the daemon went away with the request waiting
  Error last{0, "no attempt"};
  for (;;) {
    if (deadline) {
      if (clock::monotonicUs() >= deadline)
        return Error{last.code, fmt::format("{}; the daemon did not come back in {}", last.message,
                                            units::humanDuration(reconnectUs))};
      pollfd p{signalFd, POLLIN, 0};
      if (::poll(&p, signalFd >= 0 ? 1 : 0, 500) > 0)
        return Error{EINTR, "a stop signal arrived while waiting for the daemon"};
    }
    auto c = Client::connect(path);
    if (!c) {
      if (!deadline) return c.error();
      last = c.error();
      continue;
    }
    auto m = c->send(
        method, params,
        [&](const Message& ev) {
          queued = true;
          if (onEvent) onEvent(ev);
        },
        firstAnswerMs, signalFd);
    if (m) return WaitedCall{std::move(*c), std::move(*m)};
    int code = m.error().code;
    bool lost = code == ECONNRESET || code == EPIPE;
    if (!lost || (!queued && !deadline)) return m.error();
    last = m.error();
    if (!deadline)
      say(
          fmt::format("the daemon at {} went away while the request waited ({}); it is queued "
                      "again when the daemon is back (up to {})",
                      path, m.error().message, units::humanDuration(reconnectUs)));
    deadline = clock::monotonicUs() + reconnectUs;
    queued = false;
  }
}

}  // namespace tally::rpc
