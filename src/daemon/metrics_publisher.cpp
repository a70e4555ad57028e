#include "daemon/metrics_publisher.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "fs/root.h"
#include "fs/secure_dir.h"
#include "metrics/http_request.h"
#include "metrics/peer_uid.h"
#include "util/clock.h"

namespace tally::daemon {

Result<Textfile> Textfile::open(const std::string& path) {
  std::string dir(fs::parentPath(path));
  if (dir.empty()) dir = ".";
  std::string name(fs::baseName(path));
  if (name.empty() || name == "." || name == "..")
    return Error{0, fmt::format("metrics textfile {}: not a file name", path)};
  if (auto s = fs::checkTrustedDir(dir, "metrics textfile directory", fs::DirUse::SharedSticky); !s)
    return s.error();
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid())
    return errnoError(
        errno, fmt::format("cannot open the metrics textfile directory {} (create it first)", dir));
  return Textfile(std::move(fd), path, name);
}

Status Textfile::write(std::string_view text) const {
  if (text.size() > kMaxBytes)
    return Error{EFBIG,
                 fmt::format("the metrics exposition is {} bytes, over the textfile's "
                             "{} MiB; {} keeps its last content (GET /metrics serves it whole)",
                             text.size(), kMaxBytes >> 20, path_)};
  // node_exporter reads only *.prom: the temporary name is never collected.
  // A fresh random name each time, created exclusively and never through a
  // symlink: a name someone planted makes this write try another, nothing more.
  std::string tmp;
  UniqueFd fd;
  for (int attempt = 0; attempt < 8 && !fd.valid(); ++attempt) {
    std::uint64_t r = 0;
    if (::getrandom(&r, sizeof r, 0) != static_cast<ssize_t>(sizeof r))
      r = clock::monotonicUs() + static_cast<std::uint64_t>(attempt);
    tmp = fmt::format(".{}.{:016x}.tmp", name_, r);
    fd.reset(::openat(dir_.get(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                      0644));
    if (!fd.valid() && errno != EEXIST) break;
  }
  if (!fd.valid())
    return errnoError(
        errno, fmt::format("cannot create a temporary beside the metrics textfile {}", path_));
  auto fail = [&](int e, const char* what) {
    ::unlinkat(dir_.get(), tmp.c_str(), 0);
    return errnoError(e, fmt::format("cannot {} the metrics textfile {}", what, path_));
  };
  std::size_t off = 0;
  while (off < text.size()) {
    ssize_t n = ::write(fd.get(), text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail(n < 0 ? errno : EIO, "write");
    off += static_cast<std::size_t>(n);
  }
  // A crash after the rename must not leave an empty file under the real name.
  if (::fsync(fd.get()) != 0 || ::fchmod(fd.get(), 0644) != 0) return fail(errno, "sync");
  fd.reset();
  if (::renameat(dir_.get(), tmp.c_str(), dir_.get(), name_.c_str()) != 0)
    return fail(errno, "replace");
  return Ok{};
}

struct MetricsHttp::Conn {
  MetricsHttp* owner = nullptr;
  UniqueFd fd;
  sd_event_source* src = nullptr;
  std::string in, out;
  bool answered = false;
  std::uint64_t deadlineUs = 0;  // head, then write
};

MetricsHttp::MetricsHttp(sd_event* event, HttpLimits limits) : event_(event), limits_(limits) {}

MetricsHttp::~MetricsHttp() {
  for (auto& c : conns_) sd_event_source_disable_unref(c->src);
  sd_event_source_disable_unref(listenSrc_);
  sd_event_source_disable_unref(sweepSrc_);
}

Result<std::unique_ptr<MetricsHttp>> MetricsHttp::start(sd_event* event, const ListenAddress& at,
                                                        HttpLimits limits) {
  std::unique_ptr<MetricsHttp> m(new MetricsHttp(event, limits));
  bool v6 = at.host.find(':') != std::string::npos;
  UniqueFd fd(::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return errnoError(errno, "socket for metrics");
  int one = 1;
  (void)::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (v6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(at.port);
    inet_pton(AF_INET6, at.host.c_str(), &a->sin6_addr);
    len = sizeof *a;
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    a->sin_port = htons(at.port);
    inet_pton(AF_INET, at.host.c_str(), &a->sin_addr);
    len = sizeof *a;
  }
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0 || ::listen(fd.get(), 64) != 0) {
    return Error{
        errno,
        fmt::format(
            "cannot listen for metrics on {}:{}: {} (in use, or not an address of this host); "
            "pick another port with metrics_listen",
            at.host, at.port, std::strerror(errno))};
  }
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len) == 0) {
    m->port_ = ntohs(v6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                        : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  }
  m->listenFd_ = std::move(fd);
  if (int r = sd_event_add_io(event, &m->listenSrc_, m->listenFd_.get(), EPOLLIN,
                              &MetricsHttp::onAccept, m.get());
      r < 0) {
    return errnoError(-r, "watch the metrics socket");
  }
  if (int r = sd_event_add_time_relative(event, &m->sweepSrc_, CLOCK_MONOTONIC, 250'000, 50'000,
                                         &MetricsHttp::onSweep, m.get());
      r < 0) {
    return errnoError(-r, "metrics timer");
  }
  // Armed while a connection is open (onAccept): no scraper, no wakeup.
  sd_event_source_set_enabled(m->sweepSrc_, SD_EVENT_OFF);
  return m;
}

int MetricsHttp::onAccept(sd_event_source*, int fd, uint32_t, void* self) {
  auto* m = static_cast<MetricsHttp*>(self);
  for (;;) {
    int cfd = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (cfd < 0) break;
    UniqueFd owned(cfd);
    if (const auto& allowed = m->limits_.allowUids) {
      // Decided at accept, before a byte is read: the kernel names the peer.
      auto uid = metrics::loopbackPeerUid(cfd);
      if (!uid || (*uid != 0 && !allowed->count(*uid))) {
        std::string body =
            uid ? fmt::format("uid {} may not read tally's metrics (daemon.metrics_allow_users)\n",
                              *uid)
                : fmt::format(
                      "tally's metrics are for the users daemon.metrics_allow_users names; "
                      "this peer's user is unknown: {}\n",
                      uid.error().message);
        std::string reply = fmt::format(
            "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\n"
            "Content-Length: {}\r\nConnection: close\r\n\r\n{}",
            body.size(), body);
        (void)!::send(cfd, reply.data(), reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        ++m->refused_;
        continue;
      }
    }
    if (m->conns_.size() >= m->limits_.maxConnections) {
      // Full: the oldest connection that has not finished its request head
      // makes room (a scraper sends its head at once; a slow client does not).
      auto slow = std::find_if(m->conns_.begin(), m->conns_.end(),
                               [](const auto& c) { return !c->answered; });
      if (slow == m->conns_.end())
        continue;  // all are being answered: this one waits for its own retry
      m->drop(**slow);
    }
    auto c = std::make_unique<Conn>();
    c->owner = m;
    c->fd = std::move(owned);
    c->deadlineUs = clock::monotonicUs() + m->limits_.headTimeoutUs;
    if (sd_event_add_io(m->event_, &c->src, c->fd.get(), EPOLLIN, &MetricsHttp::onConn, c.get()) <
        0)
      continue;
    m->conns_.push_back(std::move(c));
    int on = SD_EVENT_OFF;
    if (sd_event_source_get_enabled(m->sweepSrc_, &on) >= 0 && on == SD_EVENT_OFF) {
      sd_event_source_set_time_relative(m->sweepSrc_, 250'000);
      sd_event_source_set_enabled(m->sweepSrc_, SD_EVENT_ONESHOT);
    }
  }
  return 0;
}

int MetricsHttp::onConn(sd_event_source*, int, uint32_t revents, void* conn) {
  auto* c = static_cast<Conn*>(conn);
  MetricsHttp* m = c->owner;
  if (c->answered) {
    m->flush(*c);
    return 0;
  }
  if (!(revents & (EPOLLIN | EPOLLHUP | EPOLLERR))) return 0;
  char buf[4096];
  ssize_t n = ::recv(c->fd.get(), buf, sizeof buf, 0);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return 0;
  if (n <= 0) {
    m->drop(*c);
    return 0;
  }
  c->in.append(buf, static_cast<std::size_t>(n));
  m->answer(*c);
  return 0;
}

void MetricsHttp::answer(Conn& c) {
  auto head = metrics::parseHttpHead(c.in);
  if (head.state == metrics::HttpHead::State::NeedMore) return;
  int status = 200;
  std::string body, type = "text/plain; version=0.0.4; charset=utf-8";
  if (head.state == metrics::HttpHead::State::Bad) {
    status = head.status;
    body = head.reason + "\n";
    type = "text/plain";
  } else if (head.method != "GET" && head.method != "HEAD") {
    status = 405;
    body = "only GET\n";
    type = "text/plain";
  } else if (head.target == "/metrics") {
    if (text_.empty()) {
      status = 503;
      body = "tally: no sample round has finished yet; retry in a second\n";
      type = "text/plain";
    } else {
      body = text_;
    }
  } else if (head.target == "/") {
    body = "tally daemon: metrics at /metrics\n";
    type = "text/plain";
  } else {
    status = 404;
    body = "not found; metrics are at /metrics\n";
    type = "text/plain";
  }
  const char* phrase = status == 200   ? "OK"
                       : status == 400 ? "Bad Request"
                       : status == 404 ? "Not Found"
                       : status == 405 ? "Method Not Allowed"
                       : status == 431 ? "Request Header Fields Too Large"
                       : status == 503 ? "Service Unavailable"
                                       : "HTTP Version Not Supported";
  c.out = fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
      status, phrase, type, body.size());
  if (head.method != "HEAD") c.out += body;
  c.in.clear();
  c.answered = true;
  c.deadlineUs = clock::monotonicUs() + limits_.writeTimeoutUs;
  flush(c);
}

void MetricsHttp::flush(Conn& c) {
  while (!c.out.empty()) {
    ssize_t n = ::send(c.fd.get(), c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      c.out.erase(0, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      sd_event_source_set_io_events(c.src, EPOLLOUT);
      return;
    }
    break;  // the client is gone
  }
  drop(c);  // answered in full (Connection: close) or gone
}

void MetricsHttp::drop(Conn& c) {
  sd_event_source_disable_unref(c.src);
  conns_.remove_if([&](const auto& p) { return p.get() == &c; });
}

int MetricsHttp::onSweep(sd_event_source* s, uint64_t, void* self) {
  auto* m = static_cast<MetricsHttp*>(self);
  std::uint64_t now = clock::monotonicUs();
  for (auto it = m->conns_.begin(); it != m->conns_.end();) {
    Conn& c = **it;
    ++it;
    if (now >= c.deadlineUs) m->drop(c);
  }
  if (m->conns_.empty()) return 0;  // a ONESHOT source is off once run; onAccept re-arms it
  sd_event_source_set_time_relative(s, 250'000);
  sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
  return 0;
}

}  // namespace tally::daemon
