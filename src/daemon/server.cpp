#include "daemon/server.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <grp.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tally::daemon {

struct Server::Conn {
  Server* server = nullptr;
  std::uint64_t id = 0;
  UniqueFd fd;
  sd_event_source* src = nullptr;
  Peer peer;
  rpc::LineReader reader;
  std::string out;
  bool closing = false;
};

struct Server::WatchCtx {
  Server* server = nullptr;
  std::string leaseId;
  sd_event_source* src = nullptr;
  UniqueFd pidfd;  // pid watches only
};

Server::Server(const config::Config& cfg, ServerLimits limits) : cfg_(cfg), limits_(limits) {}

Server::~Server() {
  for (auto& [id, c] : conns_) sd_event_source_disable_unref(c->src);
  for (auto& [id, w] : watches_) sd_event_source_disable_unref(w->src);
  for (auto& [id, w] : pidWatches_) sd_event_source_disable_unref(w->src);
  sd_event_source_disable_unref(listenSrc_);
  sd_event_source_disable_unref(sampleTimer_);
  sd_event_source_disable_unref(tickTimer_);
  sd_event_source_disable_unref(pruneTimer_);
  if (listenFd_.valid()) ::unlink(cfg_.daemon.socket.c_str());
  sd_event_unref(event_);
}

Status Server::listen() {
  int r = sd_event_new(&event_);
  if (r < 0) return errnoError(-r, "create the event loop");
  const std::string& path = cfg_.daemon.socket;
  std::string dir(fs::parentPath(path));
  if (!dir.empty() && ::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return errnoError(errno, fmt::format("create socket directory {} (set [daemon] socket to a writable place)", dir));
  }
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return errnoError(errno, "socket(AF_UNIX)");
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) return Error{0, fmt::format("socket path {} is too long", path)};
  std::memcpy(addr.sun_path, path.c_str(), path.size());
  // A socket file left by a daemon that died is reused; one a live daemon
  // answers on is not taken over.
  struct stat st{};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) return Error{0, fmt::format("{} exists and is not a socket; remove it or set [daemon] socket", path)};
    UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (::connect(probe.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
      return Error{0, fmt::format("another tally daemon answers on {}; stop it first", path)};
    }
    ::unlink(path.c_str());
  }
  mode_t old = ::umask(0117);
  r = ::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  ::umask(old);
  if (r != 0) return errnoError(errno, fmt::format("bind {}", path));
  if (::chmod(path.c_str(), 0660) != 0) return errnoError(errno, fmt::format("chmod 0660 {}", path));
  if (cfg_.daemon.socketGroup) {
    group* g = ::getgrnam(cfg_.daemon.socketGroup->c_str());
    if (!g) return Error{0, fmt::format("[daemon] socket_group '{}' does not exist (groupadd {} or remove the key)", *cfg_.daemon.socketGroup, *cfg_.daemon.socketGroup)};
    if (::chown(path.c_str(), static_cast<uid_t>(-1), g->gr_gid) != 0) return errnoError(errno, fmt::format("chown {} to group {}", path, *cfg_.daemon.socketGroup));
  }
  if (::listen(fd.get(), 128) != 0) return errnoError(errno, fmt::format("listen {}", path));
  listenFd_ = std::move(fd);
  r = sd_event_add_io(event_, &listenSrc_, listenFd_.get(), EPOLLIN, &Server::onAccept, this);
  if (r < 0) return errnoError(-r, "watch the socket");
  return Ok{};
}

int Server::run(Service& service) {
  service_ = &service;
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  sigprocmask(SIG_BLOCK, &stop, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  sd_event_add_signal(event_, nullptr, SIGTERM, nullptr, nullptr);
  sd_event_add_signal(event_, nullptr, SIGINT, nullptr, nullptr);
  sd_event_set_watchdog(event_, 1);  // pings WATCHDOG=1 when WatchdogSec= is set
  sd_event_add_time_relative(event_, &sampleTimer_, CLOCK_MONOTONIC, cfg_.daemon.sampleIntervalUs, 10'000, &Server::onTimer, this);
  sd_event_add_time_relative(event_, &tickTimer_, CLOCK_MONOTONIC, 250'000, 10'000, &Server::onTimer, this);
  sd_event_add_time_relative(event_, &pruneTimer_, CLOCK_MONOTONIC, 60'000'000, 1'000'000, &Server::onTimer, this);
  notifyStatus();
  sd_notify(0, "READY=1");
  int r = sd_event_loop(event_);
  sd_notify(0, "STOPPING=1");
  service_ = nullptr;
  return r < 0 ? 1 : 0;
}

void Server::notifyStatus() {
  if (!service_) return;
  std::string status = service_->statusLine();
  if (status == lastStatus_) return;
  lastStatus_ = status;
  sd_notifyf(0, "STATUS=%s", status.c_str());
}

int Server::onTimer(sd_event_source* s, uint64_t, void* self) {
  auto* srv = static_cast<Server*>(self);
  if (s == srv->sampleTimer_) {
    srv->service_->sample();
    if (srv->afterSample_) srv->afterSample_();
    sd_event_source_set_time_relative(s, srv->cfg_.daemon.sampleIntervalUs);
  } else if (s == srv->tickTimer_) {
    srv->service_->tick();
    sd_event_source_set_time_relative(s, 250'000);
  } else {
    srv->service_->prune();
    sd_event_source_set_time_relative(s, 60'000'000);
  }
  sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
  srv->notifyStatus();
  return 0;
}

int Server::onAccept(sd_event_source*, int fd, uint32_t, void* self) {
  auto* srv = static_cast<Server*>(self);
  for (;;) {
    int cfd = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (cfd < 0) break;
    UniqueFd owned(cfd);
    if (srv->conns_.size() >= srv->limits_.maxConnections) {
      std::string line = rpc::encodeError(nullptr, {rpc::code::kRefused, "too many connections to the tally daemon"});
      (void)!::send(cfd, line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      continue;
    }
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) continue;  // unidentified peers are not served
    auto c = std::make_unique<Conn>();
    c->server = srv;
    c->id = srv->nextConn_++;
    c->fd = std::move(owned);
    c->peer = Peer{cred.pid, cred.uid, cred.gid};
    if (sd_event_add_io(srv->event_, &c->src, c->fd.get(), EPOLLIN, &Server::onConn, c.get()) < 0) continue;
    std::uint64_t id = c->id;
    srv->conns_[id] = std::move(c);
  }
  return 0;
}

int Server::onConn(sd_event_source*, int, uint32_t revents, void* conn) {
  auto* c = static_cast<Conn*>(conn);
  Server* srv = c->server;
  std::uint64_t id = c->id;
  if (revents & EPOLLOUT) srv->flush(*c);
  if (srv->conns_.count(id) && (revents & (EPOLLIN | EPOLLHUP | EPOLLERR))) srv->readFrom(*c);
  return 0;
}

void Server::readFrom(Conn& c) {
  std::uint64_t id = c.id;
  char buf[65536];
  for (;;) {
    ssize_t n = ::recv(c.fd.get(), buf, sizeof buf, 0);
    if (n > 0) {
      c.reader.feed(std::string_view(buf, static_cast<std::size_t>(n)));
      while (auto line = c.reader.next()) {
        if (line->overflow) {
          send(id, rpc::encodeError(nullptr, {rpc::code::kTooLarge,
                                              fmt::format("request longer than {} bytes; it was skipped", rpc::kMaxRequestBytes)}));
          continue;
        }
        auto parsed = rpc::parseRequest(line->text);
        if (!parsed.request) {
          send(id, rpc::encodeError(parsed.id, parsed.error));
          continue;
        }
        Peer peer = c.peer;
        service_->handle(id, peer, *parsed.request);
        if (!conns_.count(id)) return;  // dropped while handling (slow reader)
      }
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n < 0 && errno == EINTR) continue;
    closeConn(id);  // EOF or error
    return;
  }
}

bool Server::send(std::uint64_t connId, std::string line) {
  auto it = conns_.find(connId);
  if (it == conns_.end()) return false;
  Conn& c = *it->second;
  c.out += line;
  if (c.out.size() > limits_.maxOutputBytes) {
    closeConn(connId);
    return false;
  }
  flush(c);
  return true;
}

void Server::flush(Conn& c) {
  while (!c.out.empty()) {
    ssize_t n = ::send(c.fd.get(), c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      c.out.erase(0, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    c.out.clear();  // the peer is gone; the read side will notice
    break;
  }
  sd_event_source_set_io_events(c.src, c.out.empty() ? EPOLLIN : (EPOLLIN | EPOLLOUT));
}

void Server::closeConn(std::uint64_t id) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  sd_event_source_disable_unref(it->second->src);
  conns_.erase(it);
  if (service_) service_->disconnected(id);
}

Status Server::watch(const std::string& leaseId, const std::string& path) {
  unwatch(leaseId);
  auto w = std::make_unique<WatchCtx>();
  w->server = this;
  w->leaseId = leaseId;
  int r = sd_event_add_inotify(event_, &w->src, path.c_str(), IN_MODIFY, &Server::onInotify, w.get());
  if (r < 0) return errnoError(-r, fmt::format("inotify {}", path));
  watches_[leaseId] = std::move(w);
  return Ok{};
}

bool Server::watchPid(const std::string& leaseId, pid_t pid) {
  int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return false;
  auto w = std::make_unique<WatchCtx>();
  w->server = this;
  w->leaseId = leaseId;
  w->pidfd.reset(fd);
  if (sd_event_add_io(event_, &w->src, fd, EPOLLIN, &Server::onPidfd, w.get()) < 0) return false;
  pidWatches_[leaseId] = std::move(w);
  return true;
}

void Server::unwatch(const std::string& leaseId) {
  for (auto* map : {&watches_, &pidWatches_}) {
    auto it = map->find(leaseId);
    if (it == map->end()) continue;
    sd_event_source_disable_unref(it->second->src);
    map->erase(it);
  }
}

int Server::onPidfd(sd_event_source* s, int, uint32_t, void* ctx) {
  auto* w = static_cast<WatchCtx*>(ctx);
  Server* srv = w->server;
  std::string id = w->leaseId;
  sd_event_source_set_enabled(s, SD_EVENT_OFF);  // a pidfd stays readable once the process is gone
  if (srv->service_) srv->service_->cgroupChanged(id);
  srv->notifyStatus();
  return 0;
}

int Server::onInotify(sd_event_source*, const struct inotify_event*, void* ctx) {
  auto* w = static_cast<WatchCtx*>(ctx);
  Server* srv = w->server;
  std::string id = w->leaseId;  // the service may unwatch (and free w) inside
  if (srv->service_) srv->service_->cgroupChanged(id);
  srv->notifyStatus();
  return 0;
}

}  // namespace tally::daemon
