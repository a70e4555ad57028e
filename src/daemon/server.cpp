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
#include <vector>

#include "daemon/line_clock.h"
#include "fs/secure_dir.h"
#include "util/clock.h"

namespace tally::daemon {

Limits limitsFromConfig(const config::Daemon& d) {
  Limits l;
  l.maxConnections = static_cast<std::size_t>(d.maxConnections);
  l.maxConnectionsPerUid = static_cast<std::size_t>(d.maxConnectionsPerUid);
  l.maxQueued = static_cast<std::size_t>(d.maxQueued);
  l.maxQueuedPerConnection = static_cast<std::size_t>(d.maxQueuedPerConnection);
  l.maxQueuedPerUid = static_cast<std::size_t>(d.maxQueuedPerUid);
  l.maxLeasesPerUid = static_cast<std::size_t>(d.maxLeasesPerUid);
  l.maxChildrenPerLease = static_cast<std::size_t>(d.maxChildrenPerLease);
  l.maxReplaysPerUid = static_cast<std::size_t>(d.maxReplaysPerUid);
  l.maxCgroupsWalkedPerUid = static_cast<std::size_t>(d.maxCgroupsWalkedPerUid);
  l.queriesPerSecondPerUid = d.queriesPerSecondPerUid;
  l.queryTimePerSecondPerUidUs = d.queryTimePerSecondPerUidUs;
  l.ledgerRowsPerMinutePerUid = d.ledgerRowsPerMinutePerUid;
  l.ledgerBytesPerMinutePerUid = d.ledgerBytesPerMinutePerUid;
  l.idleTimeoutUs = d.idleTimeoutUs;
  l.partialLineTimeoutUs = d.requestTimeoutUs;
  return l;
}

struct Server::Conn {
  Server* server = nullptr;
  std::uint64_t id = 0;
  UniqueFd fd;
  sd_event_source* src = nullptr;
  Peer peer;
  rpc::LineReader reader;
  std::size_t counted = 0;         // reader.buffered() as counted in inputBytes_
  LineClock partial;               // request_timeout: an unfinished line's wait
  std::uint64_t lastActiveUs = 0;  // last byte in or out
  std::string out;
};

struct Server::WatchCtx {
  Server* server = nullptr;
  std::string leaseId;
  std::string path;  // inotify watches only
  sd_event_source* src = nullptr;
  UniqueFd pidfd;  // pid watches only
};

Server::Server(const config::Config& cfg, Limits limits) : cfg_(cfg), limits_(limits) {}

Server::~Server() {
  for (auto& [id, c] : conns_) sd_event_source_disable_unref(c->src);
  for (auto& [id, w] : watches_) sd_event_source_disable_unref(w->src);
  for (auto& [id, w] : pidWatches_) sd_event_source_disable_unref(w->src);
  for (auto* s : {listenSrc_, sampleTimer_, tickTimer_, pruneTimer_, pendingSrc_, turnEndSrc_})
    sd_event_source_disable_unref(s);
  if (listenFd_.valid()) ::unlink(cfg_.daemon.socket.c_str());
  sd_event_unref(event_);
}

Status Server::listen() {
  int r = sd_event_new(&event_);
  if (r < 0) return errnoError(-r, "create the event loop");
  const std::string& path = cfg_.daemon.socket;
  std::string dir(fs::parentPath(path));
  if (!dir.empty() && ::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return errnoError(
        errno,
        fmt::format("create socket directory {} (set [daemon] socket to a writable place)", dir));
  }
  // The daemon unlinks and binds names in this directory: nobody else may
  // be able to swap what is there.
  if (auto s = fs::checkTrustedDir(dir.empty() ? "/" : dir, "[daemon] socket's directory",
                                   fs::DirUse::SharedSticky);
      !s)
    return s;
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return errnoError(errno, "socket(AF_UNIX)");
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path)
    return Error{0, fmt::format("socket path {} is too long", path)};
  std::memcpy(addr.sun_path, path.c_str(), path.size());
  // A socket file left by a daemon that died is reused; one a live daemon
  // answers on is not taken over.
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode))
      return Error{
          0, fmt::format("{} exists and is not a socket; remove it or set [daemon] socket", path)};
    UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (::connect(probe.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
      return Error{0, fmt::format("another tally daemon answers on {}; stop it first", path)};
    }
    ::unlink(path.c_str());
  }
  // The mode comes from the umask at bind (0660): no chmod by name afterwards,
  // which would follow a symlink put in the socket's place.
  mode_t old = ::umask(0117);
  r = ::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  ::umask(old);
  if (r != 0) return errnoError(errno, fmt::format("bind {}", path));
  if (cfg_.daemon.socketGroup) {
    group* g = ::getgrnam(cfg_.daemon.socketGroup->c_str());
    if (!g)
      return Error{
          0,
          fmt::format("[daemon] socket_group '{}' does not exist (groupadd {} or remove the key)",
                      *cfg_.daemon.socketGroup, *cfg_.daemon.socketGroup)};
    if (::fchownat(AT_FDCWD, path.c_str(), static_cast<uid_t>(-1), g->gr_gid,
                   AT_SYMLINK_NOFOLLOW) != 0) {
      return errnoError(errno, fmt::format("chown {} to group {}", path, *cfg_.daemon.socketGroup));
    }
  }
  if (::listen(fd.get(), 128) != 0) return errnoError(errno, fmt::format("listen {}", path));
  listenFd_ = std::move(fd);
  r = sd_event_add_io(event_, &listenSrc_, listenFd_.get(), EPOLLIN, &Server::onAccept, this);
  if (r < 0) return errnoError(-r, "watch the socket");
  return Ok{};
}

int Server::run(Service& service) {
  service_ = &service;
  dispatcher_ = std::make_unique<Dispatcher>(service, *this);
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  if (hangup_) sigaddset(&stop, SIGHUP);
  sigprocmask(SIG_BLOCK, &stop, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  sd_event_add_signal(event_, nullptr, SIGTERM, nullptr, nullptr);
  sd_event_add_signal(event_, nullptr, SIGINT, nullptr, nullptr);
  if (hangup_) sd_event_add_signal(event_, nullptr, SIGHUP, &Server::onHangupSignal, this);
  sd_event_set_watchdog(event_, 1);  // pings WATCHDOG=1 when WatchdogSec= is set
  sd_event_add_time_relative(event_, &sampleTimer_, CLOCK_MONOTONIC, cfg_.daemon.sampleIntervalUs,
                             10'000, &Server::onTimer, this);
  // The housekeeping tick, connection timeouts included (sweep): every
  // Service::tickIntervalUs, re-armed sooner by onTurnEnd when work arrives.
  sd_event_add_time_relative(event_, &tickTimer_, CLOCK_MONOTONIC, Service::kBusyTickUs, 10'000,
                             &Server::onTimer, this);
  sd_event_add_time_relative(event_, &pruneTimer_, CLOCK_MONOTONIC, 60'000'000, 1'000'000,
                             &Server::onTimer, this);
  sd_event_add_defer(event_, &pendingSrc_, &Server::onPending, this);
  // Below everything else: a defer source stays pending (and first in line
  // among equals) while enabled, so at the same priority it would starve
  // new connections and other clients' reads behind one client's backlog.
  sd_event_source_set_priority(pendingSrc_, SD_EVENT_PRIORITY_NORMAL + 10);
  sd_event_source_set_enabled(pendingSrc_, SD_EVENT_OFF);
  // A post source runs after any turn that dispatched something, below every
  // other source: the replies of that turn are already sent.
  sd_event_add_post(event_, &turnEndSrc_, &Server::onTurnEnd, this);
  sd_event_source_set_priority(turnEndSrc_, SD_EVENT_PRIORITY_IDLE);
  notifyStatus();
  sd_notify(0, "READY=1");
  int r = sd_event_loop(event_);
  sd_notify(0, "STOPPING=1");
  service_ = nullptr;
  return r < 0 ? 1 : 0;
}

int Server::onHangupSignal(sd_event_source*, const struct signalfd_siginfo*, void* self) {
  auto* srv = static_cast<Server*>(self);
  // systemd's reload protocol: RELOADING=1 until READY=1 says it is done.
  sd_notify(0, "RELOADING=1");
  srv->hangup_();
  sd_notify(0, "READY=1");
  srv->notifyStatus();
  return 0;
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
    // The next lease due: sample_interval, or sooner for one near its bound.
    sd_event_source_set_time_relative(
        s, std::max<std::uint64_t>(srv->service_->nextSampleDelayUs(), 1'000));
  } else if (s == srv->tickTimer_) {
    srv->service_->tick();
    std::uint64_t now = clock::monotonicUs();
    if (now - srv->lastSweepUs_ >= 1'000'000) {
      srv->lastSweepUs_ = now;
      srv->sweep();
    }
    sd_event_source_set_time_relative(s, srv->service_->tickIntervalUs());
  } else {
    srv->service_->prune();
    sd_event_source_set_time_relative(s, 60'000'000);
  }
  sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
  srv->notifyStatus();
  return 0;
}

// The peer's supplementary groups as the kernel holds them (SO_PEERGROUPS,
// Linux 4.13+): what group checks use, without an NSS look-up. None when
// unreadable: membership then rests on the primary group alone, which can
// only refuse more, never admit more.
static std::vector<gid_t> peerGroups(int fd) {
  std::vector<gid_t> groups(32);
  for (int tries = 0; tries < 2; ++tries) {
    auto len = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) == 0) {
      groups.resize(len / sizeof(gid_t));
      return groups;
    }
    if (errno != ERANGE) break;
    groups.resize(len / sizeof(gid_t) + 1);
  }
  return {};
}

// Whether one more connection from this peer fits; a refused peer is told why.
bool Server::admit(const Peer& peer, int fd) {
  std::string why;
  if (peer.uid == 0) {
    if (conns_.size() >= limits_.maxConnections + limits_.rootReserve)
      why = "too many connections to the tally daemon, root's reserve included";
  } else if (conns_.size() >= limits_.maxConnections) {
    why = fmt::format("the tally daemon has {} connections (its limit); root may still connect",
                      limits_.maxConnections);
  } else if (auto it = connsPerUid_.find(peer.uid);
             it != connsPerUid_.end() && it->second >= limits_.maxConnectionsPerUid) {
    why = fmt::format("uid {} already has {} connections to the tally daemon (the per-user limit)",
                      peer.uid, it->second);
  }
  if (why.empty()) return true;
  std::string line = rpc::encodeError(nullptr, {rpc::code::kBusy, why});
  (void)!::send(fd, line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  return false;
}

int Server::onAccept(sd_event_source*, int fd, uint32_t, void* self) {
  auto* srv = static_cast<Server*>(self);
  for (;;) {
    int cfd = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (cfd < 0) break;
    UniqueFd owned(cfd);
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
      continue;  // unidentified peers are not served
    Peer peer{cred.pid, cred.uid, cred.gid, peerGroups(cfd)};
    if (!srv->admit(peer, cfd)) continue;
    auto c = std::make_unique<Conn>();
    c->server = srv;
    c->id = srv->nextConn_++;
    c->fd = std::move(owned);
    c->peer = peer;
    c->lastActiveUs = clock::monotonicUs();
    if (sd_event_add_io(srv->event_, &c->src, c->fd.get(), EPOLLIN, &Server::onConn, c.get()) < 0)
      continue;
    ++srv->connsPerUid_[peer.uid];
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
  if (!srv->conns_.count(id)) return 0;
  if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) srv->readFrom(*c);
  return 0;
}

// One read per wakeup (64 KiB at most), then at most linesPerTurn requests:
// a client that sends faster than it is served waits its turn, with its
// bytes in its own socket buffer, not in the daemon.
void Server::readFrom(Conn& c) {
  std::uint64_t id = c.id;
  char buf[65536];
  ssize_t n;
  do {
    n = ::recv(c.fd.get(), buf, sizeof buf, 0);
  } while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
  if (n <= 0) return closeConn(id);  // EOF or error
  std::uint64_t now = clock::monotonicUs();
  c.lastActiveUs = now;
  c.reader.feed(std::string_view(buf, static_cast<std::size_t>(n)));
  // Partial lines held, all connections together, stay under the budget.
  inputBytes_ = inputBytes_ - c.counted + c.reader.buffered();
  c.counted = c.reader.buffered();
  c.partial.received(c.counted != 0, now);
  if (inputBytes_ > limits_.maxInputBytes) {
    return closeWith(id, rpc::code::kBusy,
                     "the daemon holds too many unfinished requests; closing this connection");
  }
  if (!handleLines(c)) return;
  updateInterest(c);
}

bool Server::handleLines(Conn& c) {
  std::uint64_t id = c.id;
  for (std::size_t handled = 0; handled < limits_.linesPerTurn; ++handled) {
    if (c.out.size() > limits_.pauseReadingBytes) break;  // not read from until it reads
    auto line = c.reader.next();
    if (!line) break;
    Peer peer = c.peer;
    dispatcher_->line(id, peer, *line);
    if (!conns_.count(id)) return false;  // dropped while handling (it stopped reading)
  }
  if (c.reader.hasLines() && c.out.size() <= limits_.pauseReadingBytes) markPending(id);
  return true;
}

void Server::markPending(std::uint64_t id) {
  if (!pendingSrc_ || !inPending_.insert(id).second) return;
  pending_.push_back(id);
  sd_event_source_set_enabled(pendingSrc_, SD_EVENT_ON);
}

int Server::onTurnEnd(sd_event_source*, void* self) {
  auto* srv = static_cast<Server*>(self);
  if (!srv->service_) return 0;
  srv->service_->endOfTurn();
  // The turn gave the tick work (a request queued, a grace or a stop begun):
  // an idle tick, a second away, comes within a busy tick's interval.
  std::uint64_t at = 0, soon = clock::monotonicUs() + Service::kBusyTickUs;
  if (sd_event_source_get_time(srv->tickTimer_, &at) >= 0 && at > soon &&
      srv->service_->tickIntervalUs() == Service::kBusyTickUs)
    sd_event_source_set_time(srv->tickTimer_, soon);
  return 0;
}

// One connection's next share of lines per turn of the loop, round-robin:
// between two shares the loop reads, accepts and runs its timers.
int Server::onPending(sd_event_source* s, void* self) {
  auto* srv = static_cast<Server*>(self);
  for (std::vector<std::uint64_t> gone; !srv->goneLater_.empty();) {
    gone.swap(srv->goneLater_);
    for (auto id : gone) srv->service_->disconnected(id);
    gone.clear();
  }
  if (!srv->pending_.empty()) {
    std::uint64_t id = srv->pending_.front();
    srv->pending_.pop_front();
    srv->inPending_.erase(id);
    auto it = srv->conns_.find(id);
    if (it != srv->conns_.end()) {
      Conn& c = *it->second;
      if (srv->handleLines(c)) srv->updateInterest(c);  // re-queued at the back if it has more
    }
  }
  // One slice of the service's background work per share of requests: a
  // replay of a month goes at the pace of the loop, never in one turn.
  if (srv->background_) srv->background_ = srv->service_->backgroundWork();
  if (srv->pending_.empty() && srv->goneLater_.empty() && !srv->background_)
    sd_event_source_set_enabled(s, SD_EVENT_OFF);
  srv->notifyStatus();
  return 0;
}

// Read more only when every line read so far is handled and the client
// reads its replies; write when there is something to write.
void Server::updateInterest(Conn& c) {
  bool canRead = !c.reader.hasLines() && c.out.size() <= limits_.pauseReadingBytes;
  c.partial.reading(canRead, clock::monotonicUs());
  std::uint32_t events = (canRead ? EPOLLIN : 0u) | (c.out.empty() ? 0u : EPOLLOUT);
  sd_event_source_set_io_events(c.src, events);
}

bool Server::send(std::uint64_t connId, std::string line) {
  auto it = conns_.find(connId);
  if (it == conns_.end()) return false;
  Conn& c = *it->second;
  c.out += line;
  if (c.out.size() > limits_.maxOutputBytes) {
    // A client that does not read is disconnected, not buffered without end.
    closeConn(connId, true);
    return false;
  }
  flush(c);
  return conns_.count(connId) != 0;
}

std::size_t Server::backlog(std::uint64_t conn) const {
  auto it = conns_.find(conn);
  return it == conns_.end() ? 0 : it->second->out.size();
}

void Server::wantTurn() {
  background_ = true;
  if (pendingSrc_) sd_event_source_set_enabled(pendingSrc_, SD_EVENT_ON);
}

void Server::flush(Conn& c) {
  std::size_t before = c.out.size();
  while (!c.out.empty()) {
    ssize_t n = ::send(c.fd.get(), c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      c.out.erase(0, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    // The peer is gone (EPIPE, ECONNRESET): nothing it asked for can reach
    // it, so the lines it left waiting go with the connection. Handling them
    // would be work for no one: a client that sends 64 KiB of `metrics` and
    // hangs up once cost a thousand renders.
    closeConn(c.id, true);
    return;
  }
  if (c.out.size() < before) c.lastActiveUs = clock::monotonicUs();
  // Drained below the pause: its waiting lines get their turn again, and a
  // replay that waited for it goes on.
  if (c.reader.hasLines() && c.out.size() <= limits_.pauseReadingBytes) markPending(c.id);
  if (!background_ && service_ && c.out.size() <= limits_.pauseReadingBytes &&
      service_->replayWaits(c.id))
    wantTurn();
  updateInterest(c);
}

void Server::closeWith(std::uint64_t id, const char* code, const std::string& message) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  std::string line = rpc::encodeError(nullptr, {code, message});
  (void)!::send(it->second->fd.get(), line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  closeConn(id);
}

void Server::closeConn(std::uint64_t id, bool later) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Conn& c = *it->second;
  inputBytes_ -= c.counted;
  if (auto u = connsPerUid_.find(c.peer.uid); u != connsPerUid_.end() && --u->second == 0)
    connsPerUid_.erase(u);
  inPending_.erase(id);  // its entry in pending_ is skipped when reached
  sd_event_source_disable_unref(c.src);
  conns_.erase(it);
  if (!service_) return;
  if (!later) return service_->disconnected(id);
  goneLater_.push_back(id);
  if (pendingSrc_) sd_event_source_set_enabled(pendingSrc_, SD_EVENT_ON);
}

// Once a second: a request line begun and not finished in time, and a
// connection that holds nothing and has been silent, are closed.
void Server::sweep() {
  std::uint64_t now = clock::monotonicUs();
  std::vector<std::pair<std::uint64_t, std::string>> drop;
  for (const auto& [id, c] : conns_) {
    if (c->partial.expired(now, limits_.partialLineTimeoutUs)) {
      drop.emplace_back(id, fmt::format("a request line was not completed within {} s; closing",
                                        limits_.partialLineTimeoutUs / 1'000'000));
    } else if (c->out.empty() && !c->reader.hasLines() &&
               now - c->lastActiveUs > limits_.idleTimeoutUs &&
               !(service_ && service_->connectionInUse(id))) {
      drop.emplace_back(id,
                        fmt::format("idle for {} s with no lease, request or subscription; closing",
                                    limits_.idleTimeoutUs / 1'000'000));
    }
  }
  for (const auto& [id, why] : drop) closeWith(id, rpc::code::kTimeout, why);
}

Status Server::watch(const std::string& leaseId, const std::string& path) {
  auto [from, to] = watches_.equal_range(leaseId);
  for (auto it = from; it != to; ++it)
    if (it->second->path == path) return Ok{};  // watched already (a lease metered again)
  auto w = std::make_unique<WatchCtx>();
  w->server = this;
  w->leaseId = leaseId;
  w->path = path;
  int r =
      sd_event_add_inotify(event_, &w->src, path.c_str(), IN_MODIFY, &Server::onInotify, w.get());
  if (r < 0) return errnoError(-r, fmt::format("inotify {}", path));
  watches_.emplace(leaseId, std::move(w));
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
  auto [from, to] = watches_.equal_range(leaseId);
  for (auto it = from; it != to; ++it) sd_event_source_disable_unref(it->second->src);
  watches_.erase(from, to);
  if (auto it = pidWatches_.find(leaseId); it != pidWatches_.end()) {
    sd_event_source_disable_unref(it->second->src);
    pidWatches_.erase(it);
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
